"""Same-process A/B verdicts: head and base measured round by round, judged on paired ratios.

Pure: takes the two measured CaseResults per case and returns the Report. Each round times
head and base back to back, so a ratio per round cancels the drift that separate runs suffer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import median

from ci_bench.judge.compare import build_report, judge_memory
from ci_bench.judge.ladder import Direction, Evidence, climb, past_threshold
from ci_bench.judge.model import judge_models
from ci_bench.judge.stats import (
    benjamini_hochberg,
    bootstrap_ratio_ci,
    paired_minimum_detectable_change,
)
from ci_bench.schema import (
    NOT_MEASURED,
    CaseResult,
    CaseVerdict,
    FailPolicy,
    KernelSummary,
    Report,
    Results,
    Thresholds,
    TimingStats,
)


def paired_ratios(head: TimingStats, base: TimingStats) -> list[float]:
    return [h / b for h, b in zip(head.samples_ms, base.samples_ms, strict=True) if b > 0]


def signed_rank_p(ratios: Sequence[float], direction: str) -> float:
    """One-sided Wilcoxon signed-rank p-value that the ratios lie above 1 ("slower") or
    below it ("faster"), on log ratios so that 1.1× and 1/1.1× weigh alike."""
    diffs = [math.log(r) for r in ratios if r > 0 and r != 1]
    if len(diffs) < 5:
        return 1.0
    from scipy import stats

    alternative = "greater" if direction == "slower" else "less"
    return float(stats.wilcoxon(diffs, alternative=alternative).pvalue)


def _direction(point: float, t: Thresholds) -> Direction | None:
    """The specification's two rules on the paired estimate: mean time and TFLOPS."""
    return past_threshold(point - 1, 1 / point if point > 0 else None, t)


def _assess(
    head: CaseResult, base: CaseResult, t: Thresholds
) -> tuple[dict, Direction | None, float]:
    """Numbers for one case and, past a threshold, the direction and its p-value.

    As for stored baselines (and asv): the estimate must pass the threshold AND the change
    must be significant (paired ratios against 1, i.e. no change).
    """
    assert head.pallas is not None
    assert base.pallas is not None
    ratios = paired_ratios(head.pallas, base.pallas)
    point, low, high = bootstrap_ratio_ci(ratios, [1.0] * len(ratios))
    numbers = {
        "ratio": point,
        "ratio_low": low,
        "ratio_high": high,
        "mean_change": point - 1,
        "tflops_ratio": 1 / point if point > 0 else None,
        "mdc": paired_minimum_detectable_change(ratios, t.significance),
    }
    direction = _direction(point, t)
    return numbers, direction, signed_rank_p(ratios, direction) if direction else 1.0


def _confirmation(
    head: CaseResult, base: CaseResult, direction: Direction | None, t: Thresholds
) -> tuple[bool, float] | None:
    """The re-measured pair: (held the same way and significant, its p-value)."""
    if direction is None or head.confirmation is None or base.confirmation is None:
        return None
    ratios = paired_ratios(head.confirmation, base.confirmation)
    p = signed_rank_p(ratios, direction)
    return _direction(median(ratios), t) == direction and p < t.significance, p


def judge_pairs(pairs: Sequence[tuple[CaseResult, CaseResult]], t: Thresholds) -> list[CaseVerdict]:
    """Verdict per case from the one ladder: past the threshold and significantly beyond
    it, controlled across the matrix with Benjamini-Hochberg, and (when re-measured) held."""
    measured = [(h, b) for h, b in pairs if h.status == "ok" and b.status == "ok"]
    assessed = {h.id: _assess(h, b, t) for h, b in measured}
    # Only cases measured on both sides form the family for false-discovery control.
    flags = benjamini_hochberg([a[2] for a in assessed.values()], t.significance)
    significant = dict(zip(assessed, flags, strict=True))
    verdicts = []
    for head, base in pairs:
        common = {"id": head.id, "kernel": head.kernel, "current": head, "baseline": base}
        if head.status != "ok":
            reason = head.error or "error"
            if base.status != "ok" and not (base.error or "").startswith(NOT_MEASURED):
                same = base.error == reason
                why = (
                    f"{reason} (the same at the merge base)"
                    if same
                    else (f"{reason}; at the merge base: {base.error}")
                )
                verdicts.append(CaseVerdict(**common, verdict="inherited", reason=why))
                continue
            verdicts.append(CaseVerdict(**common, verdict="error", reason=reason))
            continue
        if base.status != "ok":
            why = base.error or "error"
            reason = (
                why
                if why.startswith("the merge base")
                else f"the base could not be measured: {why}"
            )
            verdicts.append(CaseVerdict(**common, verdict="new", reason=reason))
            continue
        numbers, direction, p = assessed[head.id]
        memory_change, memory_verdict = judge_memory(head, base, t)
        low, high = numbers["ratio_low"], numbers["ratio_high"]
        rung = climb(
            Evidence(
                estimate=f"ratio {numbers['ratio']:.3f} [{low:.3f}, {high:.3f}]",
                direction=direction,
                p_value=p,
                significant=significant[head.id],
                confirmation=_confirmation(head, base, direction, t),
            ),
            t,
        )
        verdicts.append(
            CaseVerdict(
                **common,
                **numbers,
                memory_change=memory_change,
                memory_verdict=memory_verdict,
                verdict=rung.verdict,
                reason=rung.reason,
                p_value=None if direction is None else p,
                confirmed=rung.confirmed,
            )
        )
    return verdicts


def ab_report(
    head: Results,
    base_cases: Sequence[CaseResult],
    base_ref: str,
    thresholds: Thresholds,
    policy: FailPolicy,
    *,
    target_chips: Sequence[str] = (),
    unpaired: Mapping[str, str] | None = None,
) -> Report:
    """The A/B report: same model and rendering as a baseline comparison, mode 'ab'.

    ``unpaired``: per kernel, why its head was measured alone (the base's code hung,
    crashed or failed while imported or traced); a case is ``new`` with that reason.

    Where head and base carry their cost models, each case also gets the model's verdict
    (head against base) on the target chips (see ``judge.model.judge_models``).
    """
    by_id = {c.id: c for c in base_cases}
    pairs = [(c, by_id[c.id]) for c in head.cases if c.id in by_id]
    verdicts = judge_pairs(pairs, thresholds)
    verdicts += [
        CaseVerdict(
            id=c.id,
            kernel=c.kernel,
            verdict="new",
            reason=(unpaired or {}).get(c.kernel, f"no such kernel at {base_ref}"),
            current=c,
        )
        for c in head.cases
        if c.id not in by_id
    ]
    verdicts = judge_models(verdicts, {}, head.meta, thresholds, target_chips)
    kernels = []
    for kernel, version in head.meta.kernels.items():
        base_version = next((c.version for c in base_cases if c.kernel == kernel), None)
        kernels.append(
            KernelSummary(
                kernel=kernel,
                version=version,
                baseline_version=base_version,
                note=f"A/B against {base_ref}, measured in the same process, interleaved",
            )
        )
    return build_report(
        verdicts, kernels, head.meta, thresholds, policy, mode="ab", base_ref=base_ref
    )
