"""Issue 18's reproductions, readers: crashes, the hang, silent passes, injection.

Each test is one finding of the independent fuzzer (or of this branch's), reproduced on the
unfixed code first. They drive the CLI, in this process unless a real process matters, on
files shaped like the ones found. The writers' findings are in tests/test_writers.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_bench.store.files import dump_model
from tests.conftest import run_cli
from tests.harness.factories import case, results
from tests.harness.inproc import assert_one_line_error, call

ID = "matmul/B1-M128-K128-N128/float32"
ID4 = "matmul/B4-M128-K256-N128/float32"


@pytest.fixture
def results_file(tmp_path: Path) -> Path:
    path = tmp_path / "r.json"
    path.write_text(dump_model(results([case(ID), case(ID4)])))
    return path


def history_line(results_path: Path, folder: Path) -> Path:
    """A real history store: ``record`` of a results file."""
    outcome = call("record", str(results_path), "--history", str(folder), cwd=folder.parent)
    assert outcome.code == 0, outcome.err
    (path,) = folder.glob("*.jsonl")
    return path


def edited(path: Path, edit) -> Path:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    return path


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


# --- silent passes and invalid data -----------------------------------------------------------


def test_promote_refuses_a_complete_file_that_holds_part_of_its_matrix(tmp_path):
    matrix = [f"matmul/B1-M{m}-K128-N128/float32" for m in (128, 256, 384, 512, 640, 768)]
    res = results([case(matrix[0]), case(matrix[1])], matrix=matrix, complete=True)
    path = tmp_path / "r.json"
    path.write_text(dump_model(res))
    outcome = call("promote", str(path), "--baselines-dir", str(tmp_path / "b"), cwd=tmp_path)
    assert_one_line_error(outcome, "4 of the matrix's 6 cases were never measured", "not promoted")
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())


def test_export_never_writes_infinity(tmp_path, results_file):
    def overflow(data):  # finite milliseconds that overflow in nanoseconds
        stats = data["cases"][0]["pallas"]
        stats["median_ms"] = 1e308
        stats["samples_ms"] = [1e308] * len(stats["samples_ms"])

    edited(results_file, overflow)
    for fmt in ("bmf", "gab"):
        outcome = call("export", str(results_file), "--format", fmt, cwd=tmp_path)
        assert outcome.code == 0, outcome.err
        data = json.loads(outcome.out, parse_constant=_refuse)
        if fmt == "bmf":
            assert "latency" not in data.get(ID, {})  # left out, never Infinity
            assert "latency" in data[ID4]


def _refuse(literal: str) -> None:
    raise AssertionError(f"{literal} in JSON output")


def test_site_data_stays_strict_json_with_extreme_history(tmp_path, results_file):
    line = history_line(results_file, tmp_path / "h")
    records = []
    for i, level in enumerate([5e-324] * 3 + [1e308] * 3):
        record = json.loads(line.read_text())
        record["commit"], record["time"] = f"{i:040x}", f"2026-01-0{i + 1}T00:00:00Z"
        for point in record["cases"]:
            point.update(median_ms=level, mean_ms=level, min_ms=level, q1_ms=level, q3_ms=level)
        records.append(json.dumps(record))
    line.write_text("\n".join(records) + "\n")
    out = tmp_path / "site"
    outcome = call("site", "--out", str(out), "--history", str(tmp_path / "h"), cwd=tmp_path)
    assert outcome.code == 0, outcome.err
    data = json.loads((out / "data.json").read_text(), parse_constant=_refuse)
    changes = [c for g in data["groups"] for s in g["cases"] for c in s["changes"]]
    assert changes
    assert all(c["change"] is None or c["change"] > 1e300 for c in changes)
    outcome = call("history", "--history", str(tmp_path / "h"), "--format", "json", cwd=tmp_path)
    assert outcome.code == 0, outcome.err
    json.loads(outcome.out, parse_constant=_refuse)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('confirm = "yes"', "confirm: expected a boolean (true or false), got string 'yes'"),
        ("warmup = true", "warmup: expected an integer, got boolean 'true'"),
        ('cost-model-factor = "2"', "cost-model-factor: expected a number, got string '2'"),
        ('thresholds = { mean-slowdown = "x" }', "thresholds.mean-slowdown: expected a number"),
        ('kernels = "kernels.matmul"', "kernels: expected an array, got string"),
    ],
)
def test_config_of_the_wrong_type_names_the_key_and_the_type(tmp_path, results_file, line, needle):
    (tmp_path / "pyproject.toml").write_text(f"[tool.ci-bench]\n{line}\n")
    assert_one_line_error(
        call("compare", str(results_file), cwd=tmp_path), "pyproject.toml", needle
    )


def test_a_folder_named_pyproject_toml_is_an_error_not_skipped(tmp_path, results_file):
    (tmp_path / "pyproject.toml").write_text('[tool.ci-bench]\nbaselines-dir = "elsewhere"\n')
    inner = tmp_path / "inner"
    (inner / "pyproject.toml").mkdir(parents=True)
    outcome = call("compare", str(results_file), cwd=inner)
    assert_one_line_error(outcome, str(inner / "pyproject.toml"), "not a regular file")


@pytest.mark.parametrize("value", ["0", "257", "100000000"])
def test_workers_are_bounded(project, value):
    outcome = call("run", "--kernel", "matmul", "--workers", value, cwd=project)
    assert_one_line_error(outcome, "--workers", "between 1 and 256")


# --- injection ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("run_url", "https://github.com/o/r/actions/runs/1)<img src=x onerror=alert(1)>"),
        ("run_url", "javascript:alert(1)"),
        ("head_sha", "<img src=x>"),
        ("head_sha", "`](https://evil.example)"),
    ],
)
def test_a_crafted_artifact_cannot_put_markup_in_the_comment_footer(tmp_path, field, value):
    """The comment job refuses the report before any API call (exit 2, one line)."""
    seeds = REPO_FIXTURES / "events" / "pull_request_opened.json"
    report = _report(tmp_path)
    report[field] = value
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    (artifact / "report.json").write_text(json.dumps(report))
    env = {
        "GITHUB_EVENT_NAME": "pull_request_target",
        "GITHUB_EVENT_PATH": str(seeds),
        "GITHUB_REPOSITORY": "octo/kernels",
        "GITHUB_TOKEN": "t",
        "GITHUB_API_URL": "http://127.0.0.1:9",  # never reached
    }
    outcome = call("comment", "--report-dir", str(artifact), cwd=tmp_path, env=env)
    assert_one_line_error(outcome, "report.json", field, "not a")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("by", "x @everyone"),
        ("by", "<img src=x onerror=alert(1)>"),
        ("head_sha", "`](https://evil.example)"),
        ("label", "a" * 51),
    ],
)
def test_a_crafted_acceptance_in_the_artifact_is_refused(tmp_path, field, value):
    """ "Accepted by @<by>" is rendered from the artifact: a login, a commit, a label only."""
    seeds = REPO_FIXTURES / "events" / "pull_request_opened.json"
    report = _report(tmp_path)
    report["acceptance"] = {"label": "benchmark-accept", "by": "octo", "head_sha": "a" * 40}
    report["acceptance"][field] = value
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    (artifact / "report.json").write_text(json.dumps(report))
    env = {
        "GITHUB_EVENT_NAME": "pull_request_target",
        "GITHUB_EVENT_PATH": str(seeds),
        "GITHUB_REPOSITORY": "octo/kernels",
        "GITHUB_TOKEN": "t",
        "GITHUB_API_URL": "http://127.0.0.1:9",  # never reached
    }
    outcome = call("comment", "--report-dir", str(artifact), cwd=tmp_path, env=env)
    assert_one_line_error(outcome, "report.json", f"acceptance.{field}")


def test_an_event_sender_that_is_not_a_login_is_one_line(tmp_path):
    event = json.loads((REPO_FIXTURES / "events" / "pull_request_opened.json").read_text())
    event["sender"]["login"] = "<b>x</b> @everyone"
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    env = {"GITHUB_EVENT_NAME": "pull_request_target", "GITHUB_EVENT_PATH": str(path)}
    res = tmp_path / "r.json"
    res.write_text(dump_model(results([case(ID)])))
    args = ["ci", "--results", str(res), "--mode", "baseline", "--no-comment", "--out-dir", "o"]
    outcome = call(*args, cwd=tmp_path, env={**env, "GITHUB_REPOSITORY": "octo/kernels"})
    assert_one_line_error(outcome, "sender.login", "not a GitHub login")


REPO_FIXTURES = Path(__file__).parent / "fixtures"


def _report(tmp_path: Path) -> dict:
    res = tmp_path / "r.json"
    res.write_text(dump_model(results([case(ID)])))
    out = tmp_path / "report.json"
    outcome = call("compare", str(res), "-o", str(out), cwd=tmp_path)
    assert outcome.code == 0, outcome.err
    return json.loads(out.read_text())


@pytest.mark.parametrize("url", ["javascript:alert(1)//", "ftp://x/y", "https://x/<b>y</b>"])
def test_dashboard_links_are_http_only(tmp_path, results_file, url):
    site = ["site", "--results", str(results_file), "--out", str(tmp_path / "s")]
    outcome = call(*site, "--repo-url", url, cwd=tmp_path)
    assert_one_line_error(outcome, "--repo-url", "not a plain http(s) URL")
    env = {"GITHUB_SERVER_URL": url, "GITHUB_REPOSITORY": "octo/kernels"}
    outcome = call(*site, cwd=tmp_path, env=env)
    assert_one_line_error(outcome, "GITHUB_SERVER_URL", "not an http(s) URL")
    outcome = call(*site, cwd=tmp_path, env={"GITHUB_REPOSITORY": "octo/<b>x</b>"})
    assert_one_line_error(outcome, "GITHUB_REPOSITORY", "not OWNER/REPO")


def test_bare_urls_in_untrusted_text_do_not_autolink():
    from ci_bench.report.escape import ZWJ, md_inline

    text = md_inline("see https://evil.example/x or www.evil.example, mail a@evil.example")
    for bare in ("https://", "www.", "@evil"):
        assert bare not in text
    assert (
        text.replace(ZWJ, "")
        == "see https://evil.example/x or www.evil.example, mail a@evil.example"
    )


# --- found by the new fuzzer on this branch ---------------------------------------------------


def test_a_baseline_or_history_record_holding_a_case_twice_is_refused(tmp_path, results_file):
    store = tmp_path / "b"
    assert call("promote", str(results_file), "--baselines-dir", str(store), cwd=tmp_path).code == 0
    (baseline,) = store.glob("*.json")
    edited(baseline, lambda d: d["entries"][0]["cases"].append(d["entries"][0]["cases"][0]))
    outcome = call("compare", str(results_file), "--baselines-dir", str(store), cwd=tmp_path)
    assert_one_line_error(outcome, baseline.name, f"case {ID} twice")
    line = history_line(results_file, tmp_path / "h")
    record = json.loads(line.read_text())
    record["cases"].append(record["cases"][0])
    line.write_text(json.dumps(record) + "\n")
    outcome = call("history", "--history", str(tmp_path / "h"), "--no-baselines", cwd=tmp_path)
    assert_one_line_error(outcome, f"{line.name}:1", "twice")


def test_a_file_with_its_keys_sorted_still_reads(tmp_path, results_file):
    """JSON objects are unordered: ``jq -S`` (sorted keys) must not break the case ids."""
    results_file.write_text(json.dumps(json.loads(results_file.read_text()), sort_keys=True))
    outcome = call("merge", str(results_file), "-o", str(tmp_path / "m.json"), cwd=tmp_path)
    assert outcome.code == 0, outcome.err
    ids = [c["id"] for c in json.loads((tmp_path / "m.json").read_text())["cases"]]
    assert ids == [ID, ID4]


def test_record_reads_the_config_it_is_given(tmp_path, results_file):
    """Only --remote needs the config, but a --config that names nothing is a typo."""
    args = ["record", str(results_file), "--history", str(tmp_path / "h")]
    outcome = call(*args, "--config", str(tmp_path / "missing.toml"), cwd=tmp_path)
    assert_one_line_error(outcome, "missing.toml", "config file not found")
    assert not (tmp_path / "h").exists()
