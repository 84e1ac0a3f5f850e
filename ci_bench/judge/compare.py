"""Results + baselines -> Report with a verdict per case and overall (pure functions)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ci_bench.contract.matrix import Shard
from ci_bench.errors import ExitCode
from ci_bench.judge.change import (  # noqa: F401 -- re-exported: one case's comparison
    Change,
    decide,
    judge,
    judge_memory,
    measure_change,
)
from ci_bench.judge.ladder import (
    before_comparison,
    never_measured,
    not_run,
)
from ci_bench.judge.model import judge_models, model_references, structural_count
from ci_bench.judge.stats import (
    benjamini_hochberg,
    min_p_mann_whitney,
    repeats_needed,
)
from ci_bench.outcome import Outcome, exit_code
from ci_bench.schema import (
    VERDICT_PRECEDENCE,
    Acceptance,
    BaselineEntry,
    CaseResult,
    CaseVerdict,
    FailPolicy,
    KernelSummary,
    Lookup,
    Report,
    Results,
    RunMeta,
    RunState,
    Thresholds,
    Verdict,
)
from ci_bench.text import case_count


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


@dataclass(frozen=True)
class Pending:
    """A case measured on both sides, waiting for the matrix-wide significance decision."""

    current: CaseResult
    baseline: CaseResult
    change: Change
    toolchain: str | None  # set when the baseline was measured with another jax


def compare_kernel(
    results: Results, lookup: Lookup, thresholds: Thresholds
) -> tuple[KernelSummary, list[CaseVerdict | Pending]]:
    """Verdicts (or pending comparisons) for one kernel's cases against its baseline."""
    current = [c for c in results.cases if c.kernel == lookup.kernel]
    baseline = lookup.baseline
    entry = baseline.entry_for(results.meta.device) if baseline else None
    summary = _kernel_summary(lookup, entry, results)
    toolchain = None
    if entry is not None and entry.device.software != results.meta.device.software:
        toolchain = f"baseline measured with {entry.device.software}"
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
    verdicts: list[CaseVerdict | Pending] = []
    by_id = {c.id: c for c in entry.cases} if entry else {}
    for case in current:
        base = by_id.get(case.id)
        common = {"id": case.id, "kernel": case.kernel, "current": case, "baseline": base}
        rung = before_comparison(case, base, baseline, entry, results.meta)
        if rung is not None:
            verdicts.append(CaseVerdict(**common, verdict=rung.verdict, reason=rung.reason))
        else:
            change = measure_change(case, base, thresholds)
            verdicts.append(Pending(case, base, change, toolchain))
    same_selection = (
        entry is not None
        and not results.meta.subset
        and entry.provenance.profile == results.meta.profile
    )
    if same_selection:
        ran = {c.id for c in current}
        for base in by_id.values():
            if base.id not in ran:
                rung = not_run(entry.provenance.profile)
                verdicts.append(
                    CaseVerdict(
                        id=base.id,
                        kernel=base.kernel,
                        verdict=rung.verdict,
                        reason=rung.reason,
                        baseline=base,
                    )
                )
    return summary, verdicts


def memory_regressions(verdicts: list[CaseVerdict]) -> int:
    return sum(v.memory_verdict == "regression" for v in verdicts)


def overall(verdicts: list[CaseVerdict], run_states: Sequence[RunState] = ()) -> Verdict:
    """The worst state present, run states included; a memory regression counts as a
    regression, a model verdict beside a timing verdict as its own state (``structural``)."""
    present = {v.verdict for v in verdicts} | {r.state for r in run_states}
    if memory_regressions(verdicts):
        present.add("regression")
    if structural_count(verdicts):
        present.add("structural")
    return next((v for v in VERDICT_PRECEDENCE if v in present), "pass")


def outcome_of(
    verdicts: list[CaseVerdict], policy: FailPolicy, run_states: Sequence[RunState] = ()
) -> Outcome:
    """The judged run as an Outcome: its states (a structural model verdict beside a timing
    verdict counts as ``structural``), memory regressions, cases measured."""
    counts = Counter(v.verdict for v in verdicts) + Counter(r.state for r in run_states)
    counts["structural"] += structural_count(verdicts)
    # A case failing at the merge base too (inherited) is judged, not this run's failure to
    # measure: a run of inherited cases alone is not "nothing measured" (exit 3); it fails
    # only where the policy says inherited fails (VERDICTS.md).
    measured = sum(
        1
        for v in verdicts
        if (v.current is not None and v.current.status == "ok") or v.verdict == "inherited"
    )
    return Outcome(
        states=dict(counts),
        policy=policy,
        memory_regressions=memory_regressions(verdicts),
        measured=measured,
    )


def headline(
    verdict: Verdict, counts: Counter[str], total: int, memory: int = 0, structural: int = 0
) -> str:
    parts = [f"{counts[v]} {v}" for v in VERDICT_PRECEDENCE if counts[v]]
    if structural:
        parts.insert(0, f"{structural} structural")
    if memory:
        parts.insert(0, f"{memory} memory regression")
    return f"{verdict}: {', '.join(parts) or 'no cases'} ({case_count(total)})"


def compare(
    results: Results,
    lookups: Mapping[str, Lookup],
    thresholds: Thresholds,
    policy: FailPolicy,
    *,
    require_confirmation: bool = False,
    target_chips: Sequence[str] = (),
) -> Report:
    """The whole report: one lookup per kernel present in the results.

    ``require_confirmation``: the results were merged from shards that each ran their own
    confirmation pass; a case flagged only now was never re-measured and stays ``noisy``.
    ``target_chips``: the chips the cost model's verdict is about (config ``target-chips``;
    empty: the runner's TPU, else every chip modelled). The model is the same on every
    machine, so a baseline entry from any device is its reference.
    """
    summaries: list[KernelSummary] = []
    items: list[CaseVerdict | Pending] = []
    for kernel in dict.fromkeys(c.kernel for c in results.cases):
        summary, found = compare_kernel(results, lookups[kernel], thresholds)
        summaries.append(summary)
        items.extend(found)
    # One family for the whole matrix: Benjamini-Hochberg keeps false discoveries at the
    # significance level however many cases run.
    pending = [i for i in items if isinstance(i, Pending)]
    significant = iter(
        benjamini_hochberg([p.change.p_value for p in pending], thresholds.significance)
    )
    # Below this p-value nothing in the family can be significant on its own (BH's first
    # rank); a comparison whose smallest possible p-value is above it can never flag.
    floor = thresholds.significance / max(len(pending), 1)
    verdicts = [
        decide(
            i.current,
            i.baseline,
            i.change,
            next(significant),
            thresholds,
            toolchain=i.toolchain,
            confirmation_required=require_confirmation,
            min_repeats=_repeats_short(i, floor),
        )
        if isinstance(i, Pending)
        else i
        for i in items
    ]
    references = model_references(
        (case.id, case.model)
        for lookup in lookups.values()
        if lookup.baseline is not None
        for entry in lookup.baseline.entries
        for case in entry.cases
    )
    judged = judge_models(verdicts, references, results.meta, thresholds, target_chips)
    never = unmeasured(results)
    # A case of the run's own matrix that it never measured is that, not "missing" from the
    # selection too: one verdict per case (a report cannot hold two).
    lost = {v.id for v in never}
    all_verdicts = [v for v in judged if v.id not in lost] + never
    return build_report(all_verdicts, summaries, results.meta, thresholds, policy)


def _repeats_short(pending: Pending, floor: float) -> int | None:
    """None when the comparison can reach ``floor``; else the repeats it would need."""
    cur, base = pending.current.pallas, pending.baseline.pallas
    assert cur is not None
    assert base is not None
    if min_p_mann_whitney(cur.repeats, base.repeats) <= floor:
        return None
    return repeats_needed(lambda n: min_p_mann_whitney(n, base.repeats), floor)


def unmeasured(results: Results) -> list[CaseVerdict]:
    """Cases of the run's own matrix that have no result: a lost shard, a crash, an
    unfinished run. They fail by default: a gate never passes what it did not measure."""
    meta = results.meta
    if meta.matrix is None:
        return []
    expected = meta.matrix
    if meta.shard is not None and "+" not in meta.shard:  # one shard judged on its own
        part = Shard.parse(meta.shard)
        expected = [c for k, c in enumerate(meta.matrix) if k % part.count == part.index - 1]
    ran = {c.id for c in results.cases}
    why = "the run did not finish" if not results.meta.complete else "no shard measured it"
    rung = never_measured(why)
    return [
        CaseVerdict(
            id=case_id,
            kernel=case_id.split("/", 1)[0],
            verdict=rung.verdict,
            reason=rung.reason,
        )
        for case_id in expected
        if case_id not in ran
    ]


def build_report(
    verdicts: list[CaseVerdict],
    kernels: list[KernelSummary],
    meta: RunMeta,
    thresholds: Thresholds,
    policy: FailPolicy,
    *,
    mode: Literal["baseline", "ab", "pr"] = "baseline",
    base_ref: str | None = None,
    run_states: Sequence[RunState] = (),
    acceptance: Acceptance | None = None,
) -> Report:
    """Overall verdict, exit code, headline and counts around the per-case verdicts.

    An unfinished results file is a run state of its own (``unfinished``): whatever its
    matrix lists, a file that says it did not finish never passes.
    """
    states = list(run_states)
    if not meta.complete and not any(r.state == "unfinished" for r in states):
        states.append(RunState(state="unfinished", reason="the results file says complete: false"))
    code = exit_code(outcome_of(verdicts, policy, states))
    verdict = "error" if code == ExitCode.NOTHING_MEASURED else overall(verdicts, states)
    counts = Counter(v.verdict for v in verdicts) + Counter(r.state for r in states)
    memory = memory_regressions(verdicts)
    structural = structural_count(verdicts)
    return Report(
        mode=mode,
        base_ref=base_ref,
        verdict=verdict,
        exit_code=int(code),
        headline=headline(verdict, counts, len(verdicts), memory, structural),
        counts={v: counts[v] for v in VERDICT_PRECEDENCE if counts[v]}
        | ({"memory-regression": memory} if memory else {})
        | ({"model-structural": structural} if structural else {}),
        thresholds=thresholds,
        policy=policy,
        meta=meta,
        kernels=kernels,
        cases=verdicts,
        run_states=states,
        acceptance=acceptance,
    )
