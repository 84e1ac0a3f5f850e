"""What every step of a role works with: the request, the event, the edges it reaches
through (``Ports``), and what the steps before it made.

The runner (``pipeline.run``) builds one ``Context`` per role and hands it to each of the
plan's steps in order (``pipeline.steps``); a step reads what it needs from it and leaves
what it made there for the next. The steps of other modules (lowering, release) import
this module, never the runner, so the graph is one way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.github.context import ActionsContext
from ci_bench.outcome import Outcome
from ci_bench.pipeline.ab import OpenRuns
from ci_bench.pipeline.judging import baseline_report
from ci_bench.pipeline.kernels import HeadKernels, head_kernels
from ci_bench.pipeline.measuring import confirmed, measure, remeasure, saver, worker_runs
from ci_bench.pipeline.plan import Plan
from ci_bench.pipeline.request import Request
from ci_bench.pipeline.session import open_bench
from ci_bench.schema import Report, Results
from ci_bench.store.baselines import check_pins


@dataclass(frozen=True)
class Ports:
    """The one edge a role reaches through that tests replace: how cases are measured
    (worker processes, or this process for the pytest helper). git, GitHub and the clock
    are reached directly (``pipeline.git``, ``pipeline.publish``, ``pipeline.session``);
    the tests drive those through real repositories and the GitHub fake instead."""

    open_runs: OpenRuns = worker_runs
    # Measuring in this process (the pytest helper): the fingerprint is read here too.
    in_process: bool = False


@dataclass
class Context:
    """One role's run: its inputs (fixed) and what its steps have made so far."""

    plan: Plan
    request: Request
    actions: ActionsContext
    env: Mapping[str, str]
    out: TextIO
    ports: Ports = field(default_factory=Ports)
    # Stand-ins for the request's modules and selection (the pytest helper's one case).
    given_specs: Mapping[str, KernelSpec] | None = None
    cases: Sequence[Case] | None = None
    # Where MEASURE saves after every case (None: nowhere) and what it resumes.
    save_to: Path | None = None
    resume: Path | None = None
    # Files another job made that stand in for a step: results for MEASURE, an A/B report
    # for AB (the single job with --results / --ab-report; the report job's artifacts).
    given_results: Path | None = None
    given_ab: Path | None = None
    # How JUDGE treats the results: a re-measure must be on record (judging handed-in
    # results), and the cases the run had to measure (the report job, from the SPECs).
    require_confirmation: bool = False
    expected: list[str] | None = None
    head: str | None = None  # the commit the report is for
    # What the steps made.
    base: tuple[str, str] | None = None  # the A/B base, resolved before anything is measured
    results: Results | None = None
    ab: Report | None = None
    report: Report | None = None
    outcome: Outcome = field(default_factory=Outcome)
    kept: list[str] = field(default_factory=list)  # promote: tuned configs that stay
    head_kernels: HeadKernels | None = None
    # Done after the last step, in order (a role's closing files and summary line).
    after: list[Callable[[Context], None]] = field(default_factory=list)

    def kernels(self, *, measuring: bool = True) -> HeadKernels:
        """The head's kernels, described once by a worker (never imported in this process):
        the one that then measures first, unless the role measures nothing."""
        if self.head_kernels is None:
            self.head_kernels = head_kernels(self.request, self.env, measuring=measuring)
        return self.head_kernels

    def specs(self) -> Mapping[str, KernelSpec]:
        """The kernels' SPECs: the given ones (the pytest helper), else the head's."""
        if self.given_specs is None:
            return self.kernels().specs
        return self.given_specs


def measure_and_confirm(
    request: Request,
    env: Mapping[str, str],
    ports: Ports,
    save_to: Path | None,
    *,
    confirm: bool,
    resume: Path | None = None,
    specs: Mapping[str, KernelSpec] | None = None,
    cases: Sequence[Case] | None = None,
    head: HeadKernels | None = None,
) -> Results:
    """Measure the request's cases (resuming ``resume``, else ``--resume``) saving to
    ``save_to`` after every case and, with ``confirm``, re-measure the cases the baseline
    comparison flags in the same workers. ``specs`` and ``cases`` stand in for the
    request's modules and selection (the pytest helper's one case of a SPEC object);
    ``head``: the head's kernels as a worker described them (else described here)."""
    if specs is None:
        head = head or head_kernels(request, env, measuring=True)
        specs = head.specs
    check_pins(request.baselines.folder, request.baselines.pins)
    bench = open_bench(
        request,
        specs,
        env,
        cases=cases,
        in_process=ports.in_process,
        device=head.device if head else None,
        process=head.process if head else None,
    )

    # the shard's state file or the job's own output folder: replaced as the run grows
    save = saver(save_to, replace=True)

    with ports.open_runs(bench, None) as runs:
        results = measure(bench, runs, save, resume=resume or request.inputs.resume)
        if confirm and request.confirm:
            first = baseline_report(request, results)

            def rejudge(ids: set[str]) -> Report:
                nonlocal results
                again, _ = remeasure(bench, runs, results.cases, ids)
                results = results.model_copy(update={"cases": again})
                save(results)
                return baseline_report(request, results)

            confirmed(first, rejudge, True)
    return results
