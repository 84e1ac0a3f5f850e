"""Issue 18's reproductions, readers (see tests/test_bad_input_two.py): silent passes and
invalid data, and what the new fuzzer found.
"""

from __future__ import annotations

import json

import pytest

from ci_bench.store.files import dump_model
from tests.harness import bad_input
from tests.harness.bad_input import ID, ID4, edited, history_line
from tests.harness.factories import case, results
from tests.harness.inproc import assert_one_line_error, call

results_file = bad_input.results_file


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
