"""``ci-bench tune`` says ties as ties (issue 39) and explains a default without a ratio on
the line that reports it (issue 41)."""

from __future__ import annotations

import json

from ci_bench.errors import ExitCode
from ci_bench.pipeline.tune_hint import hints_of
from ci_bench.pipeline.tuned import winner
from ci_bench.report.tune import faster_sentence, speedup_line
from ci_bench.schema.tune import Candidate, CandidateChip, Measured, TunedCase
from tests.conftest import run_cli, write_project

ARGS = ("tune", "--chip", "v5e", "--values", "sub_rows=8,16,64")


def test_a_knob_the_model_cannot_see_is_reported_as_a_tie_never_a_best(tmp_path):
    # sub_rows changes only the inner loop over the block: every modelled figure is equal.
    write_project(tmp_path, ["sub_block_kernel"])
    done = run_cli(*ARGS, "--format", "json", "-q", cwd=tmp_path)
    assert done.returncode == ExitCode.OK, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema_version"] == 2
    (case,) = doc["cases"]
    cands = case["candidates"]
    assert len(cands) == 8  # --values sub_rows=8,16,64 and the default's 32, x 2 block_rows
    by_rows: dict[int, list[dict]] = {}
    for c in cands:
        assert c["same_as"] is None  # distinct programs: a real tie, not one program twice
        by_rows.setdefault(c["config"]["block_rows"], []).append(c)
    for rows, group in by_rows.items():
        figures = {(c["chips"]["v5e"]["modelled_us"], c["bytes"], c["steps"]) for c in group}
        assert len(figures) == 1, (rows, figures)
    # The larger block halves the steps: faster by the model; its four sub_rows share rank 1.
    assert sorted(c["chips"]["v5e"]["rank"] for c in by_rows[256]) == [1, 1, 1, 1]
    assert sorted(c["chips"]["v5e"]["rank"] for c in by_rows[128]) == [5, 5, 5, 5]
    tied = case["tied"]["v5e"]
    assert sorted(cands[i]["config"]["sub_rows"] for i in tied) == [8, 16, 32, 64]
    assert {cands[i]["config"]["block_rows"] for i in tied} == {256}
    assert case["best"]["v5e"] == tied[0]
    assert case["tie_knobs"] == {"v5e": ["sub_rows"]}
    assert case["notes"] == [
        "--values sub_rows: searched 8, 16, 64 and the default's 32 (the default config "
        "always stays a candidate)"
    ]
    # The PR's hint carries the whole set, and its sentence names no single config.
    (hint,) = hints_of(TunedCase.model_validate(case), ["v5e"])
    assert sorted(c["sub_rows"] for c in hint.tied) == [8, 16, 32, 64]
    assert hint.tie_knobs == ["sub_rows"]
    sentence = faster_sentence(
        "v5e", hint.config, hint.modelled_us, hint.default_us, 1.5, hint.tied, hint.tie_knobs
    )
    assert sentence is not None
    speedup = hint.default_us / hint.modelled_us  # the model's, at its revision
    assert sentence.startswith(
        f"4 tilings {speedup:.1f}x faster by the model exist on v5e, tied (the "
    )
    assert "cannot tell sub_rows apart; `ci-bench tune --measure` breaks the tie)" in sentence
    assert "a tiling" not in sentence
    table = run_cli(*ARGS, cwd=tmp_path)
    assert table.returncode == ExitCode.OK, table.stderr
    out = table.stdout
    assert "v5e: best: a tie of 4 configs whose sub_rows the model cannot tell apart" in out
    assert "--measure breaks it" in out
    assert "1=" in out
    assert "5= (default)" in out
    assert "=: a tie, the model cannot tell these apart" in out
    assert "--values sub_rows: searched 8, 16, 64 and the default's 32" in out
    assert "v5e: best (" not in out


def test_a_tie_that_holds_the_default_names_the_default_and_writes_nothing(tmp_path):
    write_project(tmp_path, ["sub_block_kernel"])
    args = ("tune", "--chip", "v5e", "--values", "block_rows=128", "--write")
    done = run_cli(*args, "--format", "json", cwd=tmp_path)
    assert done.returncode == ExitCode.OK, done.stderr
    (case,) = json.loads(done.stdout)["cases"]
    assert case["best"]["v5e"] == case["default_index"]  # never a tie-broken other config
    assert len(case["tied"]["v5e"]) == 4
    assert hints_of(TunedCase.model_validate(case), ["v5e"]) == []
    assert not (tmp_path / "baselines").exists()
    assert "not written for v5e: 4 configs tie by the model; --measure K" in done.stderr
    line = speedup_line(TunedCase.model_validate(case), "v5e")
    assert line is not None
    assert line.endswith(", the default (128, 32) among them")


def _case(default_chip: CandidateChip | None, why_not: str | None = None) -> TunedCase:
    best = CandidateChip(fits=True, modelled_us=0.8, bound="memory", bytes=1, rank=1)
    chips = {"v5e": default_chip} if default_chip is not None else {}
    return TunedCase(
        id="k/c",
        kernel="k",
        version="0.1.0",
        params={},
        dtype="bfloat16",
        space=2,
        candidates=[
            Candidate(config={"b": 128, "c": 256}, lowers=True, chips={"v5e": best}),
            Candidate(config={"b": 512, "c": 512}, default=True, why_not=why_not, chips=chips),
        ],
        best={"v5e": 0},
        default_index=1,
        seconds=0.0,
    )


def test_a_default_without_a_ratio_says_why_on_the_line_that_reports_it():
    why = "v5e: 24.00 MiB of VMEM (blocks, scratch, the body's values) exceed its limit of 16 MiB"
    unfit = CandidateChip(fits=False, why_not=why, modelled_us=0.6, bound="memory", bytes=1)
    assert speedup_line(_case(unfit), "v5e") == (
        "best (128, 256): 0.8 µs; the default (512, 512) does not fit v5e (24.00 MiB of VMEM "
        "(blocks, scratch, the body's values) exceed its limit of 16 MiB), so its 0.6 µs cannot "
        "run"
    )
    broken = unfit.model_copy(update={"fits": True, "lowers": False, "lowering_error": "boom"})
    assert speedup_line(_case(broken), "v5e") == (
        "best (128, 256): 0.8 µs; the default (512, 512) does not lower as v5e: boom"
    )
    unranked = _case(None, why_not="unranked: partial model, no modelled time: x")
    assert speedup_line(unranked, "v5e") == (
        "best (128, 256): 0.8 µs; the default (512, 512) is not ranked: unranked: partial "
        "model, no modelled time: x"
    )
    ranked = unfit.model_copy(update={"fits": True, "lowers": True, "rank": 2, "modelled_us": 1.6})
    assert speedup_line(_case(ranked), "v5e") == (
        "best (128, 256): 0.8 µs vs the default (512, 512)'s 1.6 µs (2.0x by the model)"
    )


def test_write_keeps_what_the_chip_measured_fastest_even_against_the_models_unique_best():
    """On a TPU v5e the model's unique best for B16 128³ float32 measured 3 % slower than
    the default, and --write kept it: the chip's measurement decides once there is one."""
    chip = CandidateChip(fits=True, modelled_us=1.2, bound="memory", bytes=1, rank=2)
    case = _case(chip)
    assert winner(case, "v5e") == 0  # nothing measured: the model's best
    timed = {"samples": 20, "device_kind": "TPU v5 lite"}
    measured = [
        Measured(config={"b": 128, "c": 256}, median_ms=0.00545, ratio=1.03, **timed),
        Measured(config={"b": 512, "c": 512}, default=True, median_ms=0.00530, **timed),
    ]
    case = case.model_copy(update={"measured": measured})
    assert winner(case, "v5e") == 1  # the default, measured fastest
    assert winner(case, "v6e") is None  # not ranked for a chip it was not searched for
    faster = [m.model_copy(update={"median_ms": 0.005}) if not m.default else m for m in measured]
    assert winner(case.model_copy(update={"measured": faster}), "v5e") == 0
