"""A pull request's verdict from both comparisons, each used for what it is good at (pure).

On a shared or drifting runner a stored baseline cannot tell this PR's slowdown from drift
or from an earlier merge; the same-process A/B of head against the merge base can. So the
A/B decides whether the PR regressed a case, and a baseline excess it does not confirm is
``drift`` — reported, never a PR failure. The specification's baseline diff stays in every
row.
"""

from __future__ import annotations

from ci_bench.judge.compare import build_report
from ci_bench.schema import (
    Acceptance,
    CaseVerdict,
    FailPolicy,
    KernelSummary,
    Report,
    RunState,
    Verdict,
)

# What the A/B says of the PR, when it says anything definite.
_AB_DECIDES: tuple[Verdict, ...] = ("regression", "improved")
# A baseline diff past a threshold that the A/B does not repeat.
_BASELINE_MOVED: tuple[Verdict, ...] = ("regression", "improved", "toolchain")


def combine_case(b: CaseVerdict, a: CaseVerdict | None) -> CaseVerdict:
    """One row: the baseline verdict ``b`` and, where the case was A/B-measured, ``a``.

    The cost model's verdict follows the same rule: the A/B's (head against the base: what
    this pull request changed) when it has one, else the baseline's.
    """
    combined = _combine(b, a)
    if a is not None and a.model is not None and combined.verdict != "error":
        return combined.model_copy(update={"model": a.model})
    return combined


def _combine(b: CaseVerdict, a: CaseVerdict | None) -> CaseVerdict:
    ab_fields = (
        {"ratio": a.ratio, "ratio_low": a.ratio_low, "ratio_high": a.ratio_high} if a else {}
    )
    if b.verdict in ("error", "unmeasured") or a is None:
        if a is None and b.verdict in _BASELINE_MOVED:
            reason = f"{b.reason} against the baseline; no A/B of this case to attribute it"
            return b.model_copy(update={"verdict": "drift", "reason": reason})
        return b
    if a.verdict == "error":
        return b.model_copy(update={"verdict": "error", "reason": a.reason} | ab_fields)
    if a.verdict in _AB_DECIDES:
        update = {
            "verdict": a.verdict,
            "reason": f"A/B against the base: {a.reason}",
            "p_value": a.p_value,
            "confirmed": a.confirmed,
        }
        return b.model_copy(update=update | ab_fields)
    if b.verdict in _BASELINE_MOVED:
        reason = (
            f"{b.reason} against the baseline, but not in the A/B against the base ({a.reason})"
        )
        return b.model_copy(update={"verdict": "drift", "reason": reason} | ab_fields)
    if a.verdict == "noisy":
        update = {"verdict": "noisy", "reason": f"A/B against the base: {a.reason}"}
        return b.model_copy(update=update | ab_fields)
    return b.model_copy(update=ab_fields)


def pr_report(baseline: Report, ab: Report, policy: FailPolicy) -> Report:
    """One report for the pull request: every baseline row, decided with the A/B."""
    by_id = {v.id: v for v in ab.cases}
    cases = [combine_case(v, by_id.get(v.id)) for v in baseline.cases]
    seen = {v.id for v in cases}
    cases += [v for v in ab.cases if v.id not in seen]  # measured only by the A/B
    note = f"PR verdict: A/B against {ab.base_ref} decides; the baseline diff shows drift"
    kernels = [
        k.model_copy(update={"warnings": k.warnings})
        if k.note
        else k.model_copy(update={"note": note})
        for k in baseline.kernels
    ]
    kernels = _with_ab_notes(kernels, ab.kernels)
    return build_report(
        cases,
        kernels,
        baseline.meta,
        baseline.thresholds,
        policy,
        mode="pr",
        base_ref=ab.base_ref,
    )


def _with_ab_notes(kernels: list[KernelSummary], ab: list[KernelSummary]) -> list[KernelSummary]:
    """Kernels only the A/B saw keep their A/B summary."""
    known = {k.kernel for k in kernels}
    return kernels + [k for k in ab if k.kernel not in known]


def with_run_states(report: Report, states: list[RunState]) -> Report:
    """The same report with run-level states added (e.g. the A/B that never reported)."""
    if not states:
        return report
    return rebuild(report, run_states=[*report.run_states, *states])


def rebuild(
    report: Report,
    *,
    cases: list[CaseVerdict] | None = None,
    run_states: list[RunState] | None = None,
    acceptance: Acceptance | None = None,
) -> Report:
    """Recompute verdict, counts, headline and exit code after changing a report's parts."""
    rebuilt = build_report(
        report.cases if cases is None else cases,
        report.kernels,
        report.meta,
        report.thresholds,
        report.policy,
        mode=report.mode,
        base_ref=report.base_ref,
        run_states=report.run_states if run_states is None else run_states,
        acceptance=acceptance or report.acceptance,
    )
    return rebuilt.model_copy(update={"head_sha": report.head_sha, "run_url": report.run_url})


def accept(report: Report, acceptance: Acceptance | None) -> Report:
    """A maintainer's accept label on this head: its regressions become ``accepted``.

    Only regressions the ladder reached (significant, and confirmed where re-measured),
    memory regressions and structural changes of the cost model are accepted; errors,
    unmeasured cases and run states still fail.
    """
    if acceptance is None:
        return report
    note = f"accepted by @{acceptance.by} for {acceptance.head_sha[:12]} ({acceptance.label})"
    cases = []
    for v in report.cases:
        update: dict = {}
        if v.verdict == "regression":
            update = {"verdict": "accepted", "reason": f"{v.reason}; {note}"}
        if v.memory_verdict == "regression":
            update["memory_verdict"] = "accepted"
            update.setdefault("reason", f"{v.reason}; memory growth {note}")
        if v.model is not None and v.model.verdict == "structural":
            update["model"] = v.model.model_copy(
                update={"verdict": "accepted", "reason": f"{v.model.reason}; {note}"}
            )
        cases.append(v.model_copy(update=update) if update else v)
    return rebuild(report, cases=cases, acceptance=acceptance)
