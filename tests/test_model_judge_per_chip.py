"""The structure a model verdict quotes is the judged chip's own (issue 51): GLA's tuned
chunk makes a v5e trace of half the grid steps of v4i's default one, and comparing GLA 0.7.0
with 0.6.0 quoted "(steps x2.00)" from v4i's trace against 0.6.0's v5e trace. The models
here are cases of ``baselines/gla_v0.7.0.json`` as first promoted (a fixture: the shipped
file was re-promoted since, with each chip's own steps), and copies of them given the
per-chip steps a model now keeps."""

from __future__ import annotations

import json
from pathlib import Path

from ci_bench.judge.model import judge_model
from ci_bench.schema import CaseModel, Thresholds
from ci_bench.schema.model import TRACES_DIFFERENTLY

FIRST = Path(__file__).resolve().parent / "fixtures" / "gla_v0.7.0_rev8_models.json"
SHIPPED = Path(__file__).resolve().parents[1] / "baselines" / "gla_v0.7.0.json"


def _promoted(case_id: str) -> CaseModel:
    """The case's model as GLA 0.7.0's baseline was first promoted."""
    return CaseModel.model_validate(json.loads(FIRST.read_text())["models"][case_id])


def _shipped(case_id: str) -> CaseModel:
    (entry,) = json.loads(SHIPPED.read_text())["entries"]
    (found,) = [c for c in entry["cases"] if c["id"] == case_id]
    return CaseModel.model_validate(found["model"])


def _with_steps(model: CaseModel, top: int, **per_chip: int) -> CaseModel:
    """``model`` with these case-level steps and each named chip's own."""
    chips = {
        name: chip.model_copy(update={"grid_steps": per_chip.get(name, chip.grid_steps)})
        for name, chip in model.chips.items()
    }
    return model.model_copy(update={"grid_steps": top, "chips": chips})


def _slower_on_v5e(model: CaseModel) -> CaseModel:
    """``model`` modelled 20 % slower on v5e: a verdict that quotes its structure."""
    v5e = model.chips["v5e"]
    chips = {**model.chips, "v5e": v5e.model_copy(update={"modelled_us": v5e.modelled_us * 1.2})}
    return model.model_copy(update={"chips": chips})


BF16 = "gla/B4-T1024-H8-K128-V128/bfloat16"  # chunk 128 on v5e (tuned), 64 on v4i


def test_the_first_baseline_kept_only_v4is_steps_for_a_chunk_tuned_case():
    base = _promoted(BF16)
    assert any(n.startswith(TRACES_DIFFERENTLY) for n in base.notes)
    assert base.chips["v5e"].grid_steps is None
    # Its v5e trace has half the steps: its per-step overhead is half v4i's trace's.
    assert base.chips["v5e"].overhead_us < base.chips["v4i"].overhead_us


def test_the_shipped_baseline_keeps_the_v5es_own_steps_half_v4is():
    """Re-promoted from a run on the chip: each chip traced as itself, v5e at its tuned
    chunk 128 (half the steps of v4i's default chunk 64)."""
    base = _shipped(BF16)
    assert any(n.startswith(TRACES_DIFFERENTLY) for n in base.notes)
    assert base.chips["v5e"].grid_steps is not None
    assert 2 * base.chips["v5e"].grid_steps == base.chips["v4i"].grid_steps


def test_a_reference_without_the_chips_own_steps_has_none_quoted():
    base = _promoted(BF16)
    head = _slower_on_v5e(_with_steps(base, top=base.grid_steps, v5e=base.grid_steps // 2))
    change = judge_model(head, base, ["v5e"], Thresholds())
    assert change is not None
    assert change.verdict == "structural"
    assert change.chip == "v5e"
    assert "steps x" not in change.reason  # v5e's own 256 against v4i's 512: never said
    assert change.steps_ratio is None


def test_both_sides_own_steps_are_set_against_each_other_on_the_judged_chip():
    base = _promoted(BF16)
    half = base.grid_steps // 2
    same = _with_steps(base, top=base.grid_steps, v5e=half)
    change = judge_model(_slower_on_v5e(same), same, ["v5e"], Thresholds())
    assert change is not None
    assert change.steps_ratio == 1.0  # v5e's own steps did not move; v4i's are not judged
    assert "steps x" not in change.reason
    doubled = _with_steps(base, top=base.grid_steps, v5e=base.grid_steps)
    change = judge_model(_slower_on_v5e(doubled), same, ["v5e"], Thresholds())
    assert change is not None
    assert change.steps_ratio == 2.0
    assert change.grid_steps == half
    assert "(steps x2.00" in change.reason


def test_a_reference_traced_once_for_every_chip_is_every_chips():
    """A model with no per-chip steps that did not trace differently (one trace for all
    chips, as before per-chip tracing) is every chip's: its steps are quoted against the
    judged chip's own."""
    single = _promoted("gla/B1-T1024-H4-K64-V64/float32")  # chunk 64 everywhere
    assert not any(n.startswith(TRACES_DIFFERENTLY) for n in single.notes)
    steps = single.grid_steps
    head = _with_steps(single, top=4 * steps, v5e=2 * steps)  # v4i's trace apart
    head = head.model_copy(update={"notes": [*head.notes, f"{TRACES_DIFFERENTLY}v5e: ..."]})
    change = judge_model(_slower_on_v5e(head), single, ["v5e"], Thresholds())
    assert change is not None
    assert change.steps_ratio == 2.0  # v5e's own, not the x4.00 of v4i's
