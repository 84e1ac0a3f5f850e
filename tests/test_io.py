from __future__ import annotations

import json

import pytest

from ci_bench.errors import InputError
from ci_bench.schema import RESULTS_READABLE, Results
from ci_bench.store.files import atomic_write_text, read_model


def read(path):
    return read_model(path, Results, what="results", schema_version=RESULTS_READABLE)


@pytest.fixture
def valid(tmp_path, project):
    from tests.conftest import run_cli

    out = tmp_path / "r.json"
    done = run_cli(
        "run",
        "--kernel",
        "matmul",
        "--case",
        "*/B1-M128-*/float32",
        "--repeats",
        "2",
        "--warmup",
        "0",
        "-o",
        str(out),
        cwd=project,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def test_a_written_results_file_validates(tmp_path, valid):
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(valid))
    assert read(path).cases[0].status == "ok"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: "{not json", "invalid JSON"),
        (lambda d: "", "results file is empty"),
        (lambda d: "[]", "must be a JSON object"),
        (lambda d: {**d, "schema_version": 99}, "schema_version: 99 is not supported"),
        (lambda d: {**d, "schema_version": 0}, "schema_version: 0 is not supported"),
        (lambda d: {k: v for k, v in d.items() if k != "schema_version"}, "schema_version: None"),
    ],
)
def test_bad_files_fail_in_one_line_naming_the_file(tmp_path, valid, mutate, expected):
    path = tmp_path / "bad.json"
    body = mutate(valid)
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    with pytest.raises(InputError, match=expected) as info:
        read(path)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_nan_and_negative_timings_name_the_field(tmp_path, valid):
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(valid).replace('"mean_ms": ', '"mean_ms": NaN, "x": ', 1))
    with pytest.raises(InputError, match=r"cases\.0\.pallas\.mean_ms: not a finite number"):
        read(path)
    valid["cases"][0]["pallas"]["mean_ms"] = -1.0
    path.write_text(json.dumps(valid))
    with pytest.raises(InputError, match=r"cases\.0\.pallas\.mean_ms: .*non-negative"):
        read(path)


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="not found"):
        read(tmp_path / "nope.json")


def test_atomic_write_replaces_whole_files_and_leaves_no_temporaries(tmp_path):
    path = tmp_path / "sub" / "f.json"
    atomic_write_text(path, "one")
    atomic_write_text(path, "two")
    assert path.read_text() == "two"
    assert [p.name for p in path.parent.iterdir()] == ["f.json"]
