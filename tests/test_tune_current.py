"""``tune --measure`` times the kernel's subject as it runs today beside the candidates, and
``--write`` never replaces it with something slower (issue 53: on a TPU v5e a backward entry
tuned over a space without the forward's tiles measured 52 µs where the forward tiles it
replaced, the kernel's fallback, ran 47 µs)."""

from __future__ import annotations

import json

import pytest

from ci_bench.errors import ExitCode
from ci_bench.pipeline.tuned import kept_current, winner, write_tuned_cases
from ci_bench.schema.tune import TunedCase, TuneReport
from tests.conftest import run_cli, write_project

SMALL = ("--values", "block_m=128,256", "--values", "block_k=128,256", "--values", "block_n=128")
V5E = "TPU v5 lite"  # the device kind a v5e reports


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> tuple[str, str]:
    """A real forced-on-CPU ``tune --measure 1`` run: its JSON and its text."""
    folder = tmp_path_factory.mktemp("tune")
    write_project(folder, ["constrained_matmul"])  # the 0.1.0 tunables
    args = ("tune", "--kernel", "matmul", "--shape", "256,256,256", "--chip", "v5e", *SMALL)
    timing = ("--measure", "1", "--measure-on-cpu", "--repeats", "3", "--warmup", "0")
    as_json = run_cli(*args, *timing, "--format", "json", "-q", cwd=folder)
    assert as_json.returncode == ExitCode.OK, as_json.stderr
    as_text = run_cli(*args, *timing, "-q", cwd=folder)
    assert as_text.returncode == ExitCode.OK, as_text.stderr
    return as_json.stdout, as_text.stdout


def test_the_subject_as_it_runs_now_is_timed_in_the_same_rounds(measured):
    as_json, as_text = measured
    (case,) = json.loads(as_json)["cases"]
    current = case["current"]
    assert current["samples"] == 3 == case["measured"][0]["samples"]
    assert current["median_ms"] > 0
    assert current["device_kind"] == "cpu"
    assert "as it runs now (its tuned entry, else the kernel's fallback):" in as_text


def _on_v5e(as_json: str, current_ms: float) -> TunedCase:
    """The run's case as if measured on a v5e, the subject as it ran at ``current_ms``."""
    data = json.loads(as_json)
    (case,) = data["cases"]
    for m in case["measured"]:
        m["device_kind"] = V5E
    case["current"] = {"median_ms": current_ms, "samples": 3, "device_kind": V5E}
    return TuneReport.model_validate(data).cases[0]


def test_a_candidate_slower_than_what_runs_is_never_written(measured, tmp_path):
    as_json, _ = measured
    fastest = min(m["median_ms"] for m in json.loads(as_json)["cases"][0]["measured"])
    kept = _on_v5e(as_json, current_ms=fastest * 0.9)
    assert kept_current(kept, "v5e")
    assert winner(kept, "v5e") is None
    assert write_tuned_cases([kept], ["v5e"], tmp_path) == []
    assert not list(tmp_path.iterdir())

    replaced = _on_v5e(as_json, current_ms=fastest * 1.1)
    assert not kept_current(replaced, "v5e")
    index = winner(replaced, "v5e")
    best = min(replaced.measured, key=lambda m: m.median_ms)
    assert index is not None
    assert replaced.candidates[index].config == best.config
    (path,) = write_tuned_cases([replaced], ["v5e"], tmp_path)
    (entry,) = json.loads(path.read_text())["cases"].values()
    assert entry["config"] == best.config


def test_what_ran_on_another_chip_does_not_decide(measured):
    as_json, _ = measured
    case = _on_v5e(as_json, current_ms=1e-9)
    other = case.model_copy(
        update={"current": case.current.model_copy(update={"device_kind": "TPU v6 lite"})}
    )
    assert kept_current(case, "v5e")
    assert not kept_current(other, "v5e")
    assert winner(other, "v5e") is not None


def test_a_kept_case_is_said_in_one_line(measured):
    from ci_bench.commands.tune import kept_message

    as_json, _ = measured
    kept = _on_v5e(as_json, current_ms=1e-6)
    line = kept_message(kept, "v5e")
    assert line is not None
    assert "\n" not in line
    assert f"{kept.id}: not written for v5e: as it runs now it measured 0.0000 ms" in line
    assert kept_message(_on_v5e(as_json, current_ms=1e6), "v5e") is None
