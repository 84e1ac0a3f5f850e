"""A pull request's verdict from both comparisons, each used for what it is good at (pure).

On a shared or drifting runner a stored baseline cannot tell this PR's slowdown from drift
or from an earlier merge; the same-process A/B of head against the merge base can. So the
A/B decides whether the PR regressed a case. A baseline excess is ``drift`` (a warning,
never a PR failure) only when it is established like a regression: slower, significant,
confirmed by a second measurement of the head, outside the A/B's interval, and larger than
twice what the two measurements of the head disagree by (a single stored run can be off by
as much); anything less stays in the row as information. The specification's baseline diff stays in
every row.
"""

from __future__ import annotations

import math
import statistics

from ci_bench.judge.compare import build_report, measure_change
from ci_bench.judge.ladder import past_threshold
from ci_bench.schema import (
    Acceptance,
    CaseVerdict,
    FailPolicy,
    KernelSummary,
    Report,
    RunState,
    Thresholds,
    Verdict,
)

# What the A/B says of the PR, when it says anything definite.
_AB_DECIDES: tuple[Verdict, ...] = ("regression", "improved")
# A baseline diff past a threshold and significant (a regression held its re-measurement).
_BASELINE_MOVED: tuple[Verdict, ...] = ("regression", "improved", "toolchain")


def combine_case(
    b: CaseVerdict, a: CaseVerdict | None, t: Thresholds, spread: float = 0.0
) -> CaseVerdict:
    """One row: the baseline verdict ``b`` and, where the case was A/B-measured, ``a``.

    ``spread``: the matrix's typical run-to-run disagreement of the head's two measurements
    (``run_to_run``), below which no baseline excess is drift. The cost model's verdict
    follows the same rule as the row: the A/B's (head against the base: what this pull
    request changed) when it has one, else the baseline's.
    """
    combined = _combine(b, a, t, spread)
    if a is not None and a.model is not None and combined.verdict != "error":
        return combined.model_copy(update={"model": a.model})
    return combined


# A baseline excess is drift only beyond this many times the run-to-run disagreement of
# two measurements of the same head: one stored run can be off by as much as either.
DRIFT_SPREAD_FACTOR = 2.0


def run_to_run(b: CaseVerdict, a: CaseVerdict | None) -> float | None:
    """|ln| of the ratio of the head's two independent mean times: the shards' and the A/B's."""
    one = b.current.pallas if b.current is not None else None
    two = a.current.pallas if a is not None and a.current is not None else None
    if one is None or two is None or one.mean_ms <= 0 or two.mean_ms <= 0:
        return None
    return abs(math.log(one.mean_ms / two.mean_ms))


def drift_confirmation(
    b: CaseVerdict, a: CaseVerdict, t: Thresholds, spread: float = 0.0
) -> str | None:
    """Why the baseline excess is real drift, or None when it is not established.

    Drift is judged like a regression: slower past the threshold and significant against the
    baseline (``b``; a faster head is good news that needs no warning), then confirmed by a
    second, independent measurement of the head (the A/B job's) against the same baseline,
    and not this pull request's: the A/B's interval for head against base leaves out the
    baseline's change. Samples within a run cannot
    tell a moved machine from one stored run that was off: so the excess must also exceed
    ``DRIFT_SPREAD_FACTOR`` times how far two runs of the same head disagree, this case's
    or the matrix's typical ``spread``, whichever is larger.
    """
    if b.verdict not in _BASELINE_MOVED or b.confirmed is False or b.mean_change is None:
        return None
    head, stored = a.current, b.baseline
    if head is None or stored is None or head.pallas is None or stored.pallas is None:
        return None
    if head.tflops is None or stored.tflops is None:
        return None
    again = measure_change(head, stored, t)
    direction = past_threshold(b.mean_change, b.tflops_ratio, t)
    if direction != "slower":
        return None  # like a regression: only a slowdown is re-measured and worth a warning
    if again.direction != direction or again.p_value >= t.significance:
        return None
    if a.ratio_low is None or a.ratio_high is None:
        return None
    low, high = a.ratio_low - 1, a.ratio_high - 1
    if low <= b.mean_change <= high:
        return None  # the A/B cannot tell the PR's change from the baseline's
    disagreement = max(run_to_run(b, a) or 0.0, spread)
    if abs(math.log1p(b.mean_change)) <= DRIFT_SPREAD_FACTOR * disagreement:
        return None  # within what separate runs of the same code differ by here
    ab = f"{(a.ratio or 1) - 1:+.1%} [{low:+.1%}, {high:+.1%}]"
    return (
        f"{b.reason} against the baseline, confirmed by the A/B job's own measurement of the "
        f"head ({again.mean_change:+.1%}, p={again.p_value:.2g}; the two runs of the head "
        f"differ by {math.expm1(disagreement):.1%}), but not in the A/B against the base "
        f"({ab}): the machine or an earlier merge moved"
    )


def _combine(b: CaseVerdict, a: CaseVerdict | None, t: Thresholds, spread: float) -> CaseVerdict:
    ab_fields = (
        {"ratio": a.ratio, "ratio_low": a.ratio_low, "ratio_high": a.ratio_high} if a else {}
    )
    if a is not None and a.verdict == "inherited" and b.verdict != "unmeasured":
        # The A/B measured the merge base on its own: it fails there too, not this PR's doing.
        return b.model_copy(update={"verdict": "inherited", "reason": a.reason} | ab_fields)
    if b.verdict in ("error", "unmeasured") or a is None:
        if a is None and b.verdict in _BASELINE_MOVED:
            reason = f"{b.reason} against the baseline; no A/B of this case to attribute it"
            if b.confirmed is not True:
                return b.model_copy(update={"verdict": "noisy", "reason": reason})
            return b.model_copy(update={"verdict": "drift", "reason": reason})
        return b
    if a.verdict == "error":
        return b.model_copy(update={"verdict": "error", "reason": a.reason} | ab_fields)
    if a.verdict == "new" and a.baseline is not None and a.baseline.status != "ok":
        # The base failed, the head did not: judged against the baseline alone, saying so.
        return b.model_copy(update={"reason": f"{a.reason}; against the baseline: {b.reason}"})
    from_ab = {"p_value": a.p_value, "confirmed": a.confirmed}
    if a.verdict in _AB_DECIDES:
        update = {"verdict": a.verdict, "reason": f"A/B against the base: {a.reason}"}
        return b.model_copy(update=update | from_ab | ab_fields)
    moved = b.verdict in (*_BASELINE_MOVED, "noisy")
    baseline_note = f"; against the baseline: {b.reason}" if moved else ""
    if a.verdict == "noisy":  # this PR may have changed it: that is what a reviewer needs
        update = {"verdict": "noisy", "reason": f"A/B against the base: {a.reason}{baseline_note}"}
        return b.model_copy(update=update | from_ab | ab_fields)
    drift = drift_confirmation(b, a, t, spread)
    if drift is not None:
        return b.model_copy(update={"verdict": "drift", "reason": drift} | ab_fields)
    if moved:
        # Past a threshold against the baseline but not established as drift: the A/B
        # decides the row (a pass); the baseline's figures stay in it, as information.
        update = {"verdict": "pass", "reason": f"A/B against the base: {a.reason}{baseline_note}"}
        return b.model_copy(update=update | from_ab | ab_fields)
    return b.model_copy(update=ab_fields)


def pr_report(baseline: Report, ab: Report, policy: FailPolicy) -> Report:
    """One report for the pull request: every baseline row, decided with the A/B."""
    by_id = {v.id: v for v in ab.cases}
    spread = matrix_spread(baseline.cases, by_id)
    t = baseline.thresholds
    cases = [combine_case(v, by_id.get(v.id), t, spread) for v in baseline.cases]
    seen = {v.id for v in cases}
    cases += [v for v in ab.cases if v.id not in seen]  # measured only by the A/B
    # Which comparison decides is the report's mode (and its method line): a per-kernel
    # note saying so again would only repeat the base's sha in every kernel's blockquote.
    kernels = _with_ab_notes(list(baseline.kernels), ab.kernels)
    return build_report(
        cases,
        kernels,
        baseline.meta,
        baseline.thresholds,
        policy,
        mode="pr",
        base_ref=ab.base_ref,
        run_states=list(ab.run_states),  # the A/B's facts about the run (a removed kernel)
    )


def matrix_spread(cases: list[CaseVerdict], ab: dict[str, CaseVerdict]) -> float:
    """The median run-to-run disagreement of the head's two measurements over the matrix."""
    found = [d for v in cases if (d := run_to_run(v, ab.get(v.id))) is not None]
    return statistics.median(found) if found else 0.0


def _with_ab_notes(kernels: list[KernelSummary], ab: list[KernelSummary]) -> list[KernelSummary]:
    """Kernels only the A/B saw keep their A/B summary; the others take the files each side
    of the A/B ran (``sources``)."""
    known = {k.kernel for k in kernels}
    sources = {k.kernel: k.sources for k in ab if k.sources is not None}
    kept = [
        k.model_copy(update={"sources": sources[k.kernel]}) if k.kernel in sources else k
        for k in kernels
    ]
    return kept + [k for k in ab if k.kernel not in known]


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
