"""The model's verdict (``structural``) in compare, A/B and the pull-request verdict."""

from __future__ import annotations

import dataclasses
import functools
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ci_bench.contract.spec import Case
from ci_bench.judge.ab import ab_report
from ci_bench.judge.compare import compare
from ci_bench.judge.model import judge_model
from ci_bench.judge.pr import pr_report
from ci_bench.measure.model import analyze_case
from ci_bench.schema import (
    BaselineEntry,
    BaselineFile,
    FailPolicy,
    Lookup,
    Provenance,
    RunSettings,
    Thresholds,
)
from kernels.matmul import SPEC as MATMUL
from kernels.matmul import BlockSizes, matmul_tiled
from tests.harness.factories import V5E, case, results

CID = "matmul/B1-M512-K512-N512/bfloat16"
CASE = Case("matmul", {"B": 1, "M": 512, "K": 512, "N": 512}, "bfloat16")
CHIPS = ["v5e", "v6e"]


@functools.cache
def model_of(bm: int, bk: int = 128, bn: int = 128):
    blocks = BlockSizes(block_m=bm, block_k=bk, block_n=bn)
    spec = dataclasses.replace(MATMUL, pallas=functools.partial(matmul_tiled, block_sizes=blocks))
    return analyze_case(spec, CASE, CHIPS)


def with_model(result, model):
    return result.model_copy(update={"model": model})


def baseline_of(cases, device=V5E) -> Lookup:
    when = datetime(2026, 10, 1, tzinfo=UTC)
    entry = BaselineEntry(
        device=device,
        provenance=Provenance(
            tag="v0.1.0", promoted_at=when, measured_at=when, tool_version="0.1.0", profile="ci"
        ),
        settings=RunSettings(warmup=5, repeats=20, seed=42, interpret=False),
        cases=cases,
    )
    doc = BaselineFile(kernel="matmul", version="0.1.0", entries=[entry])
    return Lookup("matmul", "0.1.0", Path("baselines/matmul_v0.1.0.json"), doc, None)


def test_smaller_blocks_are_structural_with_the_deltas_and_the_reverse_improved():
    t = Thresholds()
    change = judge_model(model_of(64), model_of(128), CHIPS, t)
    assert change is not None
    assert change.verdict == "structural"
    # (64, 128, 128) at 512³: 128 grid steps instead of 64; b read 8x instead of 4x:
    # 6.5 MiB instead of 4.5 MiB; VMEM 160 KiB instead of 256 KiB.
    assert change.grid_steps == 64
    assert change.hbm_bytes == 2 * 1024 * 1024
    assert change.vmem_bytes == -96 * 1024
    assert change.hbm_ratio == pytest.approx(6.5 / 4.5)
    assert change.steps_ratio == 2.0
    assert change.chip in CHIPS
    assert change.time_change > 0.5  # overhead-bound: about twice the steps
    assert "HBM x1.44" in change.reason
    assert "steps x2.00" in change.reason
    back = judge_model(model_of(128), model_of(64), CHIPS, t)
    assert back is not None
    assert back.verdict == "improved"


def test_the_same_kernel_reads_the_same_model_exactly():
    again = analyze_case(MATMUL, CASE, CHIPS)
    first = analyze_case(MATMUL, CASE, CHIPS)
    assert again.model_dump(exclude={"model_ms"}) == first.model_dump(exclude={"model_ms"})
    change = judge_model(again, first, CHIPS, Thresholds())
    assert change is not None
    assert (change.verdict, change.hbm_bytes, change.grid_steps, change.vmem_bytes) == (
        "pass",
        0,
        0,
        0,
    )
    assert change.time_change == 0.0


def test_compare_shows_the_model_beside_timing_even_against_another_devices_baseline():
    base = with_model(case(CID, 1.0), model_of(128))
    head = with_model(case(CID, 1.0), model_of(64))  # same timing: only the model moved
    run = results([head], profile="ci")  # measured on a CPU; the baseline is a v5e's
    report = compare(run, {"matmul": baseline_of([base])}, Thresholds(), FailPolicy())
    (row,) = report.cases
    assert row.verdict == "incomparable"  # timing from another device: never compared
    assert row.model is not None
    assert row.model.verdict == "structural"
    assert report.verdict == "structural"
    assert report.exit_code == 1
    assert report.counts["model-structural"] == 1
    assert "1 structural" in report.headline
    lenient = compare(
        run,
        {"matmul": baseline_of([base])},
        Thresholds(),
        FailPolicy(structural=False),
    )
    assert lenient.exit_code == 0
    assert lenient.verdict == "structural"  # still shown, just not failing


def test_the_threshold_is_configurable_and_unchanged_kernels_pass():
    base = with_model(case(CID, 1.0), model_of(128))
    same = with_model(case(CID, 1.0), model_of(128))
    run = results([same], profile="ci")
    report = compare(run, {"matmul": baseline_of([base])}, Thresholds(), FailPolicy())
    assert report.cases[0].model.verdict == "pass"
    assert report.exit_code == 0
    head = with_model(case(CID, 1.0), model_of(64))
    wide = Thresholds(model_slowdown=5.0)  # +100 % is within a 500 % threshold
    report = compare(
        results([head], profile="ci"), {"matmul": baseline_of([base])}, wide, FailPolicy()
    )
    assert report.cases[0].model.verdict == "pass"


def test_a_case_that_does_not_fit_a_target_chips_vmem_is_an_error_naming_chip_bytes_limit():
    hog = BlockSizes(block_m=1024, block_k=2048, block_n=1024)
    spec = dataclasses.replace(MATMUL, pallas=functools.partial(matmul_tiled, block_sizes=hog))
    # A 2 x 2 x 2 grid: every block moves, two buffers each (a fixed block would take one):
    # 24 MiB with the accumulator, and 4 MiB for the bfloat16 left operand Mosaic stages.
    big = Case("matmul", {"B": 1, "M": 2048, "K": 4096, "N": 2048}, "bfloat16")
    model = analyze_case(spec, big, ["v5e", "v6e"])
    cid = big.id
    run = results([with_model(case(cid, 1.0), model)], profile="ci")
    lookups = {"matmul": baseline_of([])}
    report = compare(run, lookups, Thresholds(), FailPolicy())
    (row,) = report.cases
    assert row.verdict == "error"
    assert row.reason == (
        "does not fit VMEM: on TPU v5e: 28.00 MiB of VMEM (blocks, scratch, the body's values) "
        "exceed the default scoped VMEM limit of 16.00 MiB"
    )
    assert report.exit_code == 1
    # v6e's default scoped limit is 32 MiB: fine there.
    only_v6e = compare(run, lookups, Thresholds(), FailPolicy(), target_chips=["v6e"])
    assert only_v6e.cases[0].verdict == "incomparable"  # the timing verdict, untouched


def test_ab_judges_head_against_base_and_the_pr_verdict_keeps_the_ab_model():
    head = with_model(case(CID, 1.0), model_of(64))
    base = with_model(case(CID, 1.0), model_of(128))
    ab = ab_report(results([head], profile="ci"), [base], "main (abc)", Thresholds(), FailPolicy())
    (row,) = ab.cases
    assert row.model is not None
    assert row.model.verdict == "structural"
    assert ab.exit_code == 1
    # The stored baseline already had the small blocks (an earlier merge): against it the
    # model passes, but the PR verdict takes the A/B's, this PR's change.
    stored = with_model(case(CID, 1.0), model_of(64))
    against_baseline = compare(
        results([head], profile="ci"), {"matmul": baseline_of([stored])}, Thresholds(), FailPolicy()
    )
    assert against_baseline.cases[0].model.verdict == "pass"
    pr = pr_report(against_baseline, ab, FailPolicy())
    assert pr.cases[0].model.verdict == "structural"
    assert pr.verdict == "structural"
    assert pr.exit_code == 1


def test_results_without_models_get_no_model_verdict():
    run = results([case(CID, 1.0)], profile="ci")
    report = compare(run, {"matmul": baseline_of([case(CID, 1.0)])}, Thresholds(), FailPolicy())
    assert report.cases[0].model is None
    assert report.verdict == "incomparable"


def test_a_time_measured_below_the_models_physical_floor_is_an_error_never_a_speedup():
    # 512³ bf16 at 128³ blocks: 4.5 MiB of HBM traffic at the 656.6 GB/s a streaming copy
    # measured on a v5e (revision 6): a floor of ~7.2 µs.
    model = model_of(128)
    floor_us = max(model.chips["v5e"].compute_us, model.chips["v5e"].memory_us)
    assert 6 < floor_us < 8
    too_fast = with_model(case(CID, floor_us / 1000 / 10), model)  # a tenth of the floor
    report = compare(
        results([too_fast], device=V5E, profile="ci"),
        {"matmul": baseline_of([])},
        Thresholds(),
        FailPolicy(),
    )
    (row,) = report.cases
    assert row.verdict == "error"
    assert row.reason.startswith("faster than the chip allows (")
    assert f"< floor {floor_us:,.1f} µs on v5e" in row.reason
    assert report.exit_code == 1
    # At the floor (a real run cannot beat it by half), and on a CPU, nothing is said.
    for result, device in ((case(CID, floor_us / 1000), V5E), (case(CID, 1e-6), None)):
        run = results(
            [with_model(result, model)], profile="ci", **({"device": device} if device else {})
        )
        (row,) = compare(run, {"matmul": baseline_of([])}, Thresholds(), FailPolicy()).cases
        assert row.verdict != "error"


def test_a_partial_model_is_never_a_floor():
    """Issue 39: a partial model's figures leave out work of unknown cost; a time measured
    a tenth under its floor is the model's blind spot, never a broken timer."""
    from ci_bench.judge.model import floor_error

    whole = model_of(128)
    floor_us = max(whole.chips["v5e"].compute_us, whole.chips["v5e"].memory_us)
    partial = whole.model_copy(
        update={"status": "partial", "reason": "partial: x", "not_modelled": ["x"]}
    )
    assert floor_error(whole, floor_us / 1000 / 10, "v5e") is not None
    assert floor_error(partial, floor_us / 1000 / 10, "v5e") is None
    too_fast = with_model(case(CID, floor_us / 1000 / 10), partial)
    report = compare(
        results([too_fast], device=V5E, profile="ci"),
        {"matmul": baseline_of([])},
        Thresholds(),
        FailPolicy(),
    )
    (row,) = report.cases
    assert row.verdict != "error"
    assert "faster than the chip allows" not in (row.reason or "")


def test_the_pr_comment_shows_model_improvements_partial_models_and_host_errors():
    from ci_bench.judge.model import judge_model
    from ci_bench.report.sticky import lowering_section
    from ci_bench.schema.analysis import Analysis, AnalysisMeta, AnalyzedCase
    from ci_bench.schema.lowering import LoweredCase, LoweringMeta, LoweringResults

    # Halving the grid steps (the RMSNorm): analyze says improved; so must the comment.
    change = judge_model(model_of(128), model_of(64), CHIPS, Thresholds())
    assert change.verdict == "improved"
    faster = AnalyzedCase(
        **model_of(128).model_dump(), id=CID, kernel="matmul", version="0.1.0", against=change
    )
    partial = faster.model_copy(
        update={
            "id": CID + "/backward",
            "status": "partial",
            "reason": "partial model, no modelled time: x",
            "not_modelled": ["x"],
            "against": None,
        }
    )
    meta = AnalysisMeta(
        tool_version="0", jax="0", profile="ci", chips=CHIPS, seed=42, base_ref="main"
    )
    analysis = Analysis(verdict="partial", exit_code=0, meta=meta, cases=[faster, partial])
    when = datetime(2026, 10, 1, tzinfo=UTC)
    lowering = LoweringResults(
        meta=LoweringMeta(
            tool_version="0",
            started_at=when,
            platform="tpu",
            profile="ci",
            jax="0",
            jaxlib="0",
            kernels={"matmul": "0.1.0"},
        ),
        cases=[
            LoweredCase(
                id=CID,
                kernel="matmul",
                version="0.1.0",
                params={},
                dtype="bfloat16",
                platform="tpu",
                status="host_error",
                error="lowering for tpu failed: Unsupported TPU device kind: cpu",
            ),
        ],
    )
    text = lowering_section(lowering, None, "abc", "https://x", analysis=analysis)
    assert "🚀 1 case faster on TPU by the cost model against main:" in text
    assert f"modelled {change.time_change:+.1%} on TPU {change.chip}" in text
    assert "⚠️ 1 case with a partial model (no modelled time, not judged):" in text
    assert "no structural change" not in text  # a faster case is a change
    assert "`host_error`: the machine, not the kernel" in text
    assert "❌" not in text  # a host failure is never a red mark


def _partial(model):
    return model.model_copy(
        update={
            "status": "partial",
            "reason": "partial model, no modelled time: a while loop with a dynamic trip count",
            "not_modelled": ["a while loop with a dynamic trip count"],
        }
    )


def test_a_partial_model_is_compared_by_its_structure_alone_never_by_time():
    """Against a whole base model 2x slower, the partial head would look "improved": its
    time is never judged, and structural can neither pass nor fail on it; its grid steps,
    HBM bytes and VMEM are known (lower bounds) and compared, said to be structural only."""
    partial = _partial(model_of(128))
    change = judge_model(partial, model_of(64), CHIPS, Thresholds())
    assert change is not None
    assert change.verdict == "pass"
    assert (change.time_change, change.chip, change.chips) == (None, None, {})
    assert (change.grid_steps, change.steps_ratio) == (-64, 0.5)
    assert change.hbm_bytes == -2 * 1024 * 1024
    assert change.vmem_bytes == 96 * 1024
    assert change.reason == (
        "structural only (partial model in this run: a while loop with a dynamic trip count; "
        "no time judged, its figures are lower bounds): HBM x0.69, steps x0.50, VMEM +96 KiB"
    )
    back = judge_model(model_of(64), partial, CHIPS, Thresholds())
    assert back is not None
    assert back.verdict == "pass"
    assert back.time_change is None
    assert back.reason.startswith("structural only (partial model in the reference: a while")
    assert back.reason.endswith("): HBM x1.44, steps x2.00, VMEM -96 KiB")
    same = judge_model(partial, partial, CHIPS, Thresholds())
    assert same is not None
    assert same.reason == (
        "structural only (partial model on both sides: a while loop with a dynamic trip "
        "count; no time judged, its figures are lower bounds): no structural change"
    )
    assert (same.hbm_bytes, same.grid_steps, same.vmem_bytes) == (0, 0, 0)
    # A side not modelled at all, or no chip in common: nothing to compare.
    from ci_bench.schema.model import not_modelled

    assert judge_model(partial, not_modelled("x"), CHIPS, Thresholds()) is None
    assert judge_model(partial, model_of(64), ["v4"], Thresholds()) is None


def test_the_pr_comment_shows_a_partial_cases_structure_and_never_a_time():
    """compare (and so the PR comment): a partial head against a whole baseline model, or
    against a partial one, is shown by its structure alone, under the partial heading."""
    from ci_bench.report.comment import markdown_report

    partial = _partial(model_of(128))
    base = with_model(case(CID, 1.0), model_of(64))
    run = results([with_model(case(CID, 1.0), partial)], profile="ci")
    report = compare(run, {"matmul": baseline_of([base])}, Thresholds(), FailPolicy())
    (row,) = report.cases
    assert row.model is not None
    assert (row.model.verdict, row.model.time_change) == ("pass", None)
    assert row.model.reason.startswith("structural only (partial model in this run")
    assert report.exit_code == 0
    assert report.counts.get("model-structural", 0) == 0
    text = markdown_report(report)
    assert "#### Partial cost model (no modelled time, not judged)" in text
    assert (
        f"- `{CID}`: partial model, no modelled time: a while loop with a dynamic trip count; "
        "structural only: HBM x0.69, steps x0.50, VMEM +96 KiB against the reference"
    ) in text
    assert "| partial  |" in text  # the model column: no time
    assert "Structural" not in text
    assert "improved" not in text
    # A partial baseline model (the A/B's base side is one too) is the reference when no
    # whole one is: compared by structure.
    base = with_model(case(CID, 1.0), _partial(model_of(64)))
    report = compare(run, {"matmul": baseline_of([base])}, Thresholds(), FailPolicy())
    (row,) = report.cases
    assert row.model is not None
    assert row.model.time_change is None
    assert row.model.reason.startswith("structural only (partial model on both sides: a while")
    assert "structural only: HBM x0.69, steps x0.50" in markdown_report(report)


def test_the_lowering_section_shows_analyze_bases_structural_only_comparisons():
    """The pull request's lowering section (``analyze --base``'s markdown): a partial case
    says why and its structure against the base, a whole case against a partial base model
    what that comparison says; neither shows a time nor counts as a change."""
    from ci_bench.report.sticky import lowering_section
    from ci_bench.schema.analysis import Analysis, AnalysisMeta, AnalyzedCase
    from ci_bench.schema.lowering import LoweringMeta, LoweringResults

    partial = _partial(model_of(128))
    head = AnalyzedCase(
        **partial.model_dump(),
        id=CID,
        kernel="matmul",
        version="0.1.0",
        against=judge_model(partial, model_of(64), CHIPS, Thresholds()),
    )
    whole = AnalyzedCase(
        **model_of(64).model_dump(),
        id=CID + "/backward",
        kernel="matmul",
        version="0.1.0",
        against=judge_model(model_of(64), partial, CHIPS, Thresholds()),
    )
    meta = AnalysisMeta(
        tool_version="0", jax="0", profile="ci", chips=CHIPS, seed=42, base_ref="main"
    )
    analysis = Analysis(verdict="partial", exit_code=0, meta=meta, cases=[head, whole])
    lowering = LoweringResults(
        meta=LoweringMeta(
            tool_version="0",
            started_at=datetime(2026, 10, 1, tzinfo=UTC),
            platform="tpu",
            profile="ci",
            jax="0",
            jaxlib="0",
            kernels={"matmul": "0.1.0"},
        ),
        cases=[],
    )
    text = lowering_section(lowering, None, "abc", "https://x", analysis=analysis)
    assert "⚠️ 2 cases with a partial model (no modelled time, not judged):" in text
    assert (
        f"- `{CID}`: partial model, no modelled time: a while loop with a dynamic trip count; "
        "structural only: HBM x0.69, steps x0.50, VMEM +96 KiB against main"
    ) in text
    assert (
        f"- `{CID}/backward`: structural only (partial model in the reference: a while loop "
        "with a dynamic trip count; no time judged, its figures are lower bounds): HBM x1.44, "
        "steps x2.00, VMEM -96 KiB"
    ) in text
    # Their structure moved: never "no structural change" for every case.
    assert "✅ no structural change by the cost model against main in the wholly modelled" in text
    assert "modelled" not in text.replace("no modelled time", "").replace("wholly modelled", "")
    assert "📐" not in text
    assert "🚀" not in text


def test_a_modelled_change_past_the_largest_float_is_stored_finite():
    """Found by the seed-48 long fuzz run: a head modelled at 1e308 µs over a denormal base
    made the chip's change inf, which the report wrote as null and its own reader refused."""
    from ci_bench.schema import ModelChange

    head, base = model_of(128), model_of(128)
    chip = CHIPS[0]

    def scaled(model, us: float):
        chips = {**model.chips, chip: model.chips[chip].model_copy(update={"modelled_us": us})}
        return model.model_copy(update={"chips": chips})

    change = judge_model(scaled(head, 1e308), scaled(base, 5e-324), CHIPS, Thresholds())
    assert change is not None
    assert change.verdict == "structural"
    assert change.chips[chip].change == sys.float_info.max
    back = ModelChange.model_validate_json(change.model_dump_json())  # the reader takes it
    assert back.chips[chip].change == sys.float_info.max


def test_a_reference_from_another_cost_model_revision_is_shown_but_never_judged():
    """A baseline promoted by an older ci-bench holds the figures of an older cost model (no
    vector term, 7x's MXU at its peak): its model moving is the model's change, not the
    kernel's, so it is a ``pass`` saying why; the same revision on both sides is judged."""
    from ci_bench.schema.model import MODEL_REVISION

    assert model_of(64).revision == MODEL_REVISION  # every model the tool writes says it
    older = model_of(128).model_copy(update={"revision": None})
    base = with_model(case(CID, 1.0), older)
    head = with_model(case(CID, 1.0), model_of(64))  # +100 % modelled: structural if judged
    report = compare(
        results([head], profile="ci"), {"matmul": baseline_of([base])}, Thresholds(), FailPolicy()
    )
    (row,) = report.cases
    assert row.model is not None
    assert row.model.verdict == "pass"
    assert row.model.reason.startswith(
        f"not judged: the reference was modelled by cost model revision unrecorded, this run "
        f"by {MODEL_REVISION} (modelled +"
    )
    assert "remodel the baseline (ci-bench remodel) or promote a new one" in row.model.reason
    assert row.model.time_change is not None
    assert row.model.time_change > 0.5
    assert report.exit_code == 0
    assert report.counts.get("model-structural", 0) == 0
    # Same revision: judged as before.
    judged = judge_model(model_of(64), model_of(128), CHIPS, Thresholds())
    assert judged is not None
    assert judged.verdict == "structural"


def test_copies_counted_at_their_whole_block_are_no_memory_floor():
    """An edge block counted whole (dma.EDGE_NOTE) bounds the HBM bytes from above: a run
    under half that memory floor is a kernel moving its real, smaller blocks, never an
    error; under half the MXU floor it still is one."""
    from ci_bench.judge.model import floor_error
    from ci_bench.measure.model.dma import EDGE_NOTE

    whole = model_of(128)
    v5e = whole.chips["v5e"]
    assert v5e.memory_us > 2 * v5e.compute_us  # memory-bound: the HBM part is its floor
    bounded = whole.model_copy(update={"notes": [*whole.notes, EDGE_NOTE]})
    between_ms = v5e.memory_us * 0.4 / 1000
    assert floor_error(whole, between_ms, "v5e") is not None
    assert floor_error(bounded, between_ms, "v5e") is None
    assert floor_error(bounded, v5e.compute_us * 0.4 / 1000, "v5e") is not None


def test_the_floor_charges_the_mxu_at_its_peak_where_the_model_charges_a_measured_rate():
    """7x's compute_us is at its measured rate (82.8 % of the peak); the floor guard divides
    the same FLOPs by the peak: a run between the two floors is fast, never an error."""
    from ci_bench.judge.model import floor_error
    from ci_bench.measure.model.chips import chip

    blocks = BlockSizes(block_m=1024, block_k=1024, block_n=1024)
    spec = dataclasses.replace(MATMUL, pallas=functools.partial(matmul_tiled, block_sizes=blocks))
    big = Case("matmul", {"B": 1, "M": 8192, "K": 8192, "N": 8192}, "bfloat16")
    model = analyze_case(spec, big, ["7x"])
    seven = model.chips["7x"]
    assert seven.mxu_fraction == pytest.approx(chip("7x").mxu_fraction)
    peak_us = 2 * 8192**3 / chip("7x").bf16_flops_per_s * 1e6
    assert seven.compute_us * seven.mxu_fraction == pytest.approx(peak_us)
    assert peak_us > seven.memory_us  # MXU-bound: the MXU part is the floor
    # Just above half the peak floor: allowed; just under: an error naming the peak floor.
    assert floor_error(model, peak_us * 0.51 / 1000, "7x") is None
    below = floor_error(model, peak_us * 0.49 / 1000, "7x")
    assert below is not None
    assert f"floor {peak_us:,.1f} µs on 7x" in below
    # Half the measured-rate floor would have flagged that first run: it is below it.
    assert peak_us * 0.51 < 0.5 * seven.compute_us
