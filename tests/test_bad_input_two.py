"""Issue 18's reproductions, readers: crashes, the hang, silent passes, injection.

Each test is one finding of the independent fuzzer (or of this branch's), reproduced on the
unfixed code first. They drive the CLI, in this process unless a real process matters, on
files shaped like the ones found. The writers' findings are in tests/test_writers.py.
This file: crashes and the hang; silent passes in tests/test_bad_input_two_silent.py,
injection in tests/test_bad_input_two_injection.py.
"""

from __future__ import annotations

import json

import pytest

from ci_bench.store.files import dump_model
from tests.conftest import run_cli
from tests.harness import bad_input
from tests.harness.bad_input import ID, edited, history_line
from tests.harness.factories import case, results
from tests.harness.inproc import assert_one_line_error, call

results_file = bad_input.results_file


# --- crashes: history files ------------------------------------------------------------------


@pytest.mark.parametrize("command", ["history", "site"])
def test_a_history_file_that_is_not_utf8_is_one_line(tmp_path, results_file, command):
    line = history_line(results_file, tmp_path / "h")
    line.write_bytes(line.read_bytes() + b"\xff\xfe\n")
    extra = ["--out", str(tmp_path / "site")] if command == "site" else []
    outcome = call(
        command, "--history", str(tmp_path / "h"), "--no-baselines", *extra, cwd=tmp_path
    )
    assert_one_line_error(outcome, line.name, "not UTF-8")


@pytest.mark.parametrize("command", ["history", "site"])
def test_a_history_record_whose_kernel_version_is_not_semver_is_refused(
    tmp_path, results_file, command
):
    """Found by the long fuzz run: ``kernels: {"zz": "x"}`` in a history line passed."""
    line = history_line(results_file, tmp_path / "h")
    record = json.loads(line.read_text().splitlines()[0])
    record["kernels"]["other"] = "x"
    line.write_text(json.dumps(record) + "\n")
    extra = ["--out", str(tmp_path / "site")] if command == "site" else []
    outcome = call(
        command, "--history", str(tmp_path / "h"), "--no-baselines", *extra, cwd=tmp_path
    )
    assert_one_line_error(outcome, line.name, "kernels.other")


def test_naive_and_aware_timestamps_mix_in_site_and_record(tmp_path, results_file):
    """A naive time is read as UTC: records from any writer sort together."""
    line = history_line(results_file, tmp_path / "h")
    other = json.loads(line.read_text())
    other["commit"], other["time"] = "f" * 40, "2027-01-01T00:00:00"  # naive
    line.write_text(line.read_text() + json.dumps(other) + "\n")
    site = call(
        "site", "--out", str(tmp_path / "s"), "--history", str(tmp_path / "h"), cwd=tmp_path
    )
    assert site.code == 0, site.err
    newer = edited(results_file, lambda d: d["meta"].update(started_at="2027-06-01T00:00:00+02:00"))
    edited(newer, lambda d: d["meta"]["git"].update(commit="e" * 40))
    record = call("record", str(newer), "--history", str(tmp_path / "h"), cwd=tmp_path)
    assert record.code == 0, record.err
    times = [json.loads(x)["time"] for x in line.read_text().splitlines()]
    assert times == sorted(times)
    assert all(t.endswith("Z") for t in times)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"a":' * 100_000 + "1" + "}" * 100_000, "nested deeper than 64 levels"),
        (None, "median_ms: not a finite number"),
    ],
)
def test_a_deep_or_nan_history_line_is_one_line(tmp_path, results_file, text, needle):
    line = history_line(results_file, tmp_path / "h")
    if text is None:  # NaN would reach change-point detection
        text = line.read_text().replace('"median_ms":', '"median_ms":NaN,"x":', 1).strip()
    line.write_text(line.read_text() + text + "\n")
    outcome = call("history", "--history", str(tmp_path / "h"), "--no-baselines", cwd=tmp_path)
    assert_one_line_error(outcome, f"{line.name}:2", needle)


@pytest.mark.parametrize("command", ["history", "site", "record"])
def test_a_deeply_nested_results_file_is_one_line_for_every_reader(tmp_path, command):
    deep = tmp_path / "deep.json"
    deep.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    args = {
        "history": ["history", "--results", str(deep), "--no-baselines"],
        "site": ["site", "--results", str(deep), "--no-baselines", "--out", str(tmp_path / "s")],
        "record": ["record", str(deep), "--history", str(tmp_path / "h")],
    }[command]
    assert_one_line_error(call(*args, cwd=tmp_path), "deep.json", "nested deeper than 64 levels")
    assert_one_line_error(call("compare", str(deep), cwd=tmp_path), "nested deeper than 64")


def test_change_points_skip_levels_they_cannot_take():
    """Zero, infinite or NaN medians never reach ruptures (its log would be -inf or NaN)."""
    from ci_bench.report.history import usable

    assert [usable(v) for v in (1.0, 0.0, float("nan"), float("inf"), None)] == [
        True,
        False,
        False,
        False,
        False,
    ]


def test_extreme_levels_give_finite_changes():
    from ci_bench.judge.changepoint import detect

    (change,) = detect([5e-324] * 6 + [1e308] * 6)
    assert (change.index, change.before, change.after) == (6, 5e-324, 1e308)
    assert change.change > 1e300  # huge, and finite: JSON can hold it


# --- crashes: shards, plots, paths -----------------------------------------------------------


def test_a_shard_with_thousands_of_digits_is_one_line(tmp_path, results_file):
    edited(results_file, lambda d: d["meta"].update(shard="1/" + "9" * 5000))
    for args in (["merge", str(results_file), "-o", "m.json"], ["compare", str(results_file)]):
        assert_one_line_error(call(*args, cwd=tmp_path), "meta.shard", "not I/N")
    outcome = call("lower", "--platform", "tpu", "--shard", "1/" + "9" * 5000, cwd=tmp_path)
    assert_one_line_error(outcome, "--shard", "wants I/N")
    assert len(outcome.err) < 1000  # the 5,000 digits are not echoed back


def test_plot_leaves_out_what_a_log_axis_cannot_draw(tmp_path, results_file):
    def huge(data):
        data["cases"][0]["tflops"] = 1e308
        data["cases"][0]["metrics"]["arithmetic_intensity"] = 1e308

    edited(results_file, huge)
    chart = tmp_path / "chart.png"
    outcome = call("plot", str(results_file), "-o", str(chart), cwd=tmp_path)
    assert outcome.code == 0, outcome.err
    assert chart.read_bytes().startswith(b"\x89PNG")

    def all_huge(data):
        for c in data["cases"]:
            c["tflops"] = c["metrics"]["arithmetic_intensity"] = 1e308

    edited(results_file, all_huge)
    outcome = call("plot", str(results_file), "-o", str(tmp_path / "c2.png"), cwd=tmp_path)
    assert_one_line_error(outcome, "nothing to plot")


def test_a_path_that_is_not_utf8_is_refused_before_it_reaches_a_report(tmp_path, results_file):
    folder = tmp_path / "b-\udcff"  # the bytes b"b-\xff"
    folder.mkdir()
    outcome = call("compare", str(results_file), "--baselines-dir", str(folder), cwd=tmp_path)
    assert_one_line_error(outcome, "--baselines-dir", "not UTF-8")


# --- the hang ---------------------------------------------------------------------------------


def test_sixty_thousand_duplicate_ids_do_not_hang(tmp_path):
    """9 MB of one repeated case id: the duplicate check counts instead of searching
    (quadratic, it ran for minutes). A real process with a hang limit, not a timing."""
    res = json.loads(dump_model(results([case(ID)])))
    small = {k: res["cases"][0][k] for k in ("id", "kernel", "version", "params", "shape", "dtype")}
    small.update(status="error", error="x")
    res["cases"] = [small] * 60_000
    path = tmp_path / "dups.json"
    path.write_text(json.dumps(res))
    assert path.stat().st_size > 9_000_000
    for args in (["compare", str(path)], ["merge", str(path), "-o", "m.json"]):
        done = run_cli(*args, cwd=tmp_path, timeout=120)  # TimeoutExpired would be the hang
        assert done.returncode == 2, done.stderr
        assert "duplicate case ids: matmul/B1-M128-K128-N128/float32" in done.stderr
