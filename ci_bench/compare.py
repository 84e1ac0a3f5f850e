"""Results + baselines -> Report with a verdict per case and overall (pure functions)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from ci_bench.baselines import BaselineEntry, Lookup
from ci_bench.errors import ExitCode
from ci_bench.schema import (
    VERDICT_PRECEDENCE,
    CaseResult,
    CaseVerdict,
    FailPolicy,
    KernelSummary,
    MemoryVerdict,
    Report,
    Results,
    Thresholds,
    Verdict,
)
from ci_bench.stats import mann_whitney_p


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


def judge(current: CaseResult, baseline: CaseResult, thresholds: Thresholds) -> CaseVerdict:
    """The specification's thresholds, plus significance on the raw samples.

    Past a threshold and significant: regression (or improved). Past a threshold but not
    significant: noisy, a warning; a gate that cries wolf gets switched off.
    """
    cur, base = current.pallas, baseline.pallas
    cur_tflops, base_tflops = current.tflops, baseline.tflops
    if cur is None or base is None or cur_tflops is None or base_tflops is None:
        raise ValueError(f"{current.id}: only two measured (ok) cases can be judged")
    mean_change = cur.mean_ms / base.mean_ms - 1 if base.mean_ms > 0 else 0.0
    tflops_ratio = cur_tflops / base_tflops if base_tflops > 0 else None
    slower = mean_change > thresholds.mean_slowdown or (
        tflops_ratio is not None and tflops_ratio < 1 - thresholds.tflops_drop
    )
    faster = mean_change < -thresholds.mean_slowdown or (
        tflops_ratio is not None and tflops_ratio > 1 + thresholds.tflops_drop
    )
    memory_change, memory_verdict = judge_memory(current, baseline, thresholds)
    common = {
        "id": current.id,
        "kernel": current.kernel,
        "current": current,
        "baseline": baseline,
        "mean_change": mean_change,
        "tflops_ratio": tflops_ratio,
        "memory_change": memory_change,
        "memory_verdict": memory_verdict,
    }
    if not (slower or faster):
        return CaseVerdict(**common, verdict="pass", reason="within thresholds")
    direction = "greater" if slower else "less"
    p = mann_whitney_p(cur.samples_ms, base.samples_ms, direction)
    word = "slower" if slower else "faster"
    change = f"{mean_change:+.1%} mean"
    if p < thresholds.significance:
        verdict: Verdict = "regression" if slower else "improved"
        reason = f"{change}, significantly {word} (p={p:.2g})"
    else:
        verdict = "noisy"
        reason = f"{change} but not significant (p={p:.2g} ≥ {thresholds.significance})"
    return CaseVerdict(**common, verdict=verdict, reason=reason, p_value=p)


def _kernel_summary(lookup: Lookup, entry: BaselineEntry | None, results: Results) -> KernelSummary:
    warnings = []
    if entry is not None and entry.device.software != results.meta.device.software:
        warnings.append(
            f"{lookup.kernel}: baseline measured with {entry.device.software}, "
            f"this run with {results.meta.device.software}"
        )
    baseline = lookup.baseline
    return KernelSummary(
        kernel=lookup.kernel,
        version=lookup.version,
        baseline_version=baseline.version if baseline else None,
        baseline_path=str(lookup.path) if lookup.path else None,
        note=lookup.note,
        provenance=entry.provenance if entry else None,
        baseline_device=entry.device if entry else None,
        warnings=warnings,
    )


def compare_kernel(
    results: Results, lookup: Lookup, thresholds: Thresholds
) -> tuple[KernelSummary, list[CaseVerdict]]:
    """Verdicts for one kernel's cases against its looked-up baseline file."""
    current = [c for c in results.cases if c.kernel == lookup.kernel]
    baseline = lookup.baseline
    entry = baseline.entry_for(results.meta.device) if baseline else None
    summary = _kernel_summary(lookup, entry, results)
    wrong_model = [c for c in current if c.cost_check and c.cost_check.status == "mismatch"]
    if wrong_model:
        first = wrong_model[0]
        reason = first.cost_check.reason if first.cost_check else ""
        summary = summary.model_copy(
            update={
                "warnings": [
                    *summary.warnings,
                    f"{lookup.kernel}: FLOPs model disagrees with XLA in {len(wrong_model)} "
                    f"case(s), e.g. {first.id}: {reason}; TFLOPS and MFU may be wrong",
                ]
            }
        )
    verdicts: list[CaseVerdict] = []
    by_id = {c.id: c for c in entry.cases} if entry else {}
    for case in current:
        base = by_id.get(case.id)
        common = {"id": case.id, "kernel": case.kernel, "current": case, "baseline": base}
        if case.status != "ok":
            verdicts.append(CaseVerdict(**common, verdict="error", reason=case.error or "error"))
        elif baseline is None:
            verdicts.append(CaseVerdict(**common, verdict="new", reason="no baseline file"))
        elif entry is None:
            devices = ", ".join(e.device.identity for e in baseline.entries)
            reason = f"baseline recorded on {devices}; this run on {results.meta.device.identity}"
            verdicts.append(CaseVerdict(**common, verdict="incomparable", reason=reason))
        elif base is None:
            verdicts.append(CaseVerdict(**common, verdict="new", reason="not in the baseline"))
        else:
            verdicts.append(judge(case, base, thresholds))
    same_selection = (
        entry is not None
        and not results.meta.subset
        and entry.provenance.profile == results.meta.profile
    )
    if same_selection:
        ran = {c.id for c in current}
        for base in by_id.values():
            if base.id not in ran:
                verdicts.append(
                    CaseVerdict(
                        id=base.id,
                        kernel=base.kernel,
                        verdict="missing",
                        reason=f"in the {entry.provenance.profile} baseline, not run",
                        baseline=base,
                    )
                )
    return summary, verdicts


def memory_regressions(verdicts: list[CaseVerdict]) -> int:
    return sum(v.memory_verdict == "regression" for v in verdicts)


def overall(verdicts: list[CaseVerdict]) -> Verdict:
    """The worst state present; a memory regression counts as a regression."""
    present = {v.verdict for v in verdicts}
    if memory_regressions(verdicts):
        present.add("regression")
    return next((v for v in VERDICT_PRECEDENCE if v in present), "pass")


def exit_code(verdicts: list[CaseVerdict], policy: FailPolicy) -> ExitCode:
    """0 pass; 1 regression or a state the policy fails on; 3 nothing measured."""
    counts = Counter(v.verdict for v in verdicts)
    measured = sum(1 for v in verdicts if v.current is not None and v.current.status == "ok")
    if measured == 0:
        return ExitCode.NOTHING_MEASURED
    failing = (
        counts["regression"]
        or memory_regressions(verdicts)
        or (
            (policy.error and counts["error"])
            or (policy.missing and counts["missing"])
            or (policy.noisy and counts["noisy"])
        )
    )
    return ExitCode.FAILED if failing else ExitCode.OK


def headline(verdict: Verdict, counts: Counter[str], total: int, memory: int = 0) -> str:
    parts = [f"{counts[v]} {v}" for v in VERDICT_PRECEDENCE if counts[v]]
    if memory:
        parts.insert(0, f"{memory} memory regression")
    return f"{verdict}: {', '.join(parts) or 'no cases'} ({total} cases)"


def compare(
    results: Results,
    lookups: Mapping[str, Lookup],
    thresholds: Thresholds,
    policy: FailPolicy,
) -> Report:
    """The whole report: one lookup per kernel present in the results."""
    summaries: list[KernelSummary] = []
    verdicts: list[CaseVerdict] = []
    for kernel in dict.fromkeys(c.kernel for c in results.cases):
        summary, found = compare_kernel(results, lookups[kernel], thresholds)
        summaries.append(summary)
        verdicts.extend(found)
    verdict = overall(verdicts)
    code = exit_code(verdicts, policy)
    if code == ExitCode.NOTHING_MEASURED:
        verdict = "error"
    counts = Counter(v.verdict for v in verdicts)
    return Report(
        verdict=verdict,
        exit_code=int(code),
        headline=headline(verdict, counts, len(verdicts), memory_regressions(verdicts)),
        counts={v: counts[v] for v in VERDICT_PRECEDENCE if counts[v]}
        | (
            {"memory-regression": memory_regressions(verdicts)}
            if memory_regressions(verdicts)
            else {}
        ),
        thresholds=thresholds,
        policy=policy,
        meta=results.meta,
        kernels=summaries,
        cases=verdicts,
    )
