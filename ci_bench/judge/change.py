"""One case against its baseline: how it moved (``measure_change``) and the ladder's
verdict on it (``decide``), before the matrix-wide decisions of ``judge.compare``."""

from __future__ import annotations

from dataclasses import dataclass

from ci_bench.judge.ladder import Direction, Evidence, climb, past_threshold
from ci_bench.judge.stats import Direction as StatsDirection
from ci_bench.judge.stats import mann_whitney_p, minimum_detectable_change
from ci_bench.schema import CaseResult, CaseVerdict, MemoryVerdict, Thresholds


def judge_memory(
    current: CaseResult, baseline: CaseResult, thresholds: Thresholds
) -> tuple[float | None, MemoryVerdict | None]:
    """Peak-memory growth beyond ``memory_growth`` is a memory regression."""
    cur, base = current.peak_bytes, baseline.peak_bytes
    if not cur or not base:
        return None, None
    change = cur / base - 1
    if change > thresholds.memory_growth:
        return change, "regression"
    if change < -thresholds.memory_growth:
        return change, "improved"
    return change, "pass"


@dataclass(frozen=True)
class Change:
    """How a measured case moved against its baseline, before any verdict."""

    mean_change: float
    tflops_ratio: float | None
    direction: Direction | None
    p_value: float  # one-sided, in the direction the mean moved
    mdc: float | None
    # The confirmation pass: (still past the threshold the same way, its p-value).
    confirmation: tuple[bool, float] | None


def measure_change(current: CaseResult, baseline: CaseResult, t: Thresholds) -> Change:
    """The specification's two figures (mean_ms, tflops) plus the sample statistics."""
    cur, base = current.pallas, baseline.pallas
    cur_tflops, base_tflops = current.tflops, baseline.tflops
    if cur is None or base is None or cur_tflops is None or base_tflops is None:
        raise ValueError(f"{current.id}: only two measured (ok) cases can be judged")
    mean_change = cur.mean_ms / base.mean_ms - 1 if base.mean_ms > 0 else 0.0
    tflops_ratio = cur_tflops / base_tflops if base_tflops > 0 else None
    direction = past_threshold(mean_change, tflops_ratio, t)
    sense: StatsDirection = "greater" if mean_change >= 0 else "less"
    p = mann_whitney_p(cur.samples_ms, base.samples_ms, sense)
    confirmation = None
    again = current.confirmation
    if again is not None:
        change2 = again.mean_ms / base.mean_ms - 1 if base.mean_ms > 0 else 0.0
        direction2 = past_threshold(change2, 1 / (1 + change2) if change2 > -1 else None, t)
        p2 = mann_whitney_p(again.samples_ms, base.samples_ms, sense)
        held = direction is not None and direction2 == direction and p2 < t.significance
        confirmation = (held, p2)
    mdc = minimum_detectable_change(cur.samples_ms, base.samples_ms, t.significance)
    return Change(mean_change, tflops_ratio, direction, p, mdc, confirmation)


def decide(
    current: CaseResult,
    baseline: CaseResult,
    change: Change,
    significant: bool,
    t: Thresholds,
    *,
    toolchain: str | None = None,
    confirmation_required: bool = False,
    min_repeats: int | None = None,
) -> CaseVerdict:
    """The ladder's verdict on this comparison's evidence, with its numbers attached.

    ``min_repeats``: the repeats this comparison would need before any change could be
    significant at this matrix size; then its MDC is not a promise it can keep (null).
    """
    memory_change, memory_verdict = judge_memory(current, baseline, t)
    rung = climb(
        Evidence(
            estimate=f"{change.mean_change:+.1%} mean",
            direction=change.direction,
            p_value=change.p_value,
            significant=significant,
            confirmation=change.confirmation,
            toolchain=toolchain,
            confirmation_required=confirmation_required,
        ),
        t,
    )
    reason = rung.reason
    if rung.verdict not in ("pass", "noisy"):
        min_repeats = None  # it did detect: the floor was not in the way
    if min_repeats is not None:
        reason += (
            f"; needs >= {min_repeats} repeats to detect a change of one case alone at this "
            "matrix size"
        )
    return CaseVerdict(
        id=current.id,
        kernel=current.kernel,
        current=current,
        baseline=baseline,
        mean_change=change.mean_change,
        tflops_ratio=change.tflops_ratio,
        memory_change=memory_change,
        memory_verdict=memory_verdict,
        mdc=None if min_repeats is not None else change.mdc,
        min_repeats=min_repeats,
        verdict=rung.verdict,
        reason=reason,
        p_value=None if change.direction is None else change.p_value,
        confirmed=rung.confirmed,
    )


def judge(current: CaseResult, baseline: CaseResult, thresholds: Thresholds) -> CaseVerdict:
    """One case on its own (a family of one): significant when p < the level."""
    change = measure_change(current, baseline, thresholds)
    return decide(current, baseline, change, change.p_value < thresholds.significance, thresholds)
