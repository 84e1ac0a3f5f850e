"""Measuring passes, all through one port (``Runs``): the selection (resumable), the
confirmation pass, and the A/B pairs of head and base.

The real ``Runs`` is a pool of worker processes, each pinned to one accelerator, with a time
limit per job and crash isolation (``measure.workers``): a hung or crashing case, paired or
not, is an ``error`` naming why, and the others are measured. ``InProcess`` measures in this
process (the library's pytest check, unit tests); it has neither limit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ci_bench.contract.registry import Isolated
from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.errors import InputError
from ci_bench.measure.workers import Done, Failed, Job, Started
from ci_bench.pipeline.session import Bench
from ci_bench.schema import NOT_MEASURED, CaseResult, Report, Results, RunMeta
from ci_bench.store.files import Checkpoint, dump_model

Save = Callable[[Results], None]
# A pair whose worker hung or died: the base's side of it (whose fault is found later).
PAIR_FAILED = f"{NOT_MEASURED} the pair's worker failed: "
# The verdicts a confirmation pass re-measures before they stand.
FLAGGED = frozenset({"regression", "improved"})


# Files this process has saved measured results to (the command line's last words on an
# interrupt name them, and say nothing was saved when none was).
SAVED_TO: list[Path] = []


def saver(path: Path | None, *, replace: bool) -> Save:
    """Write the growing results after every case, so nothing measured is lost; a failed
    write (a full disk) says which cases the file still holds."""
    checkpoint = Checkpoint(path, "results", replace=replace) if path is not None else None

    def save(results: Results) -> None:
        if checkpoint is not None and path is not None:
            held = f"{len(results.cases)} of {len(results.meta.matrix or ())} cases"
            checkpoint.write(dump_model(results), holds=held)
            if results.cases and path not in SAVED_TO:
                SAVED_TO.append(path)

    return save


class Runs(Protocol):
    """Measures jobs, calling ``started(i)`` and ``done(i, results)`` as each goes."""

    def run(self, jobs: Sequence[Job], failed: Failed, started: Started, done: Done) -> None: ...


@dataclass(frozen=True)
class BaseCheckout:
    """The A/B base: a checkout of the base commit, its kernel modules and their SPECs
    (described by a worker that imported them beside the head's, ``contract.isolation``;
    ``tree``/``head_tree``: the two checkouts' top levels). ``failed``: per kernel, why the
    base's code could not be used (it hung, crashed or raised while imported or traced):
    those kernels are measured on the head alone. ``isolated``: the base loaded in this
    process (the pytest helper's in-process runs only)."""

    root: Path
    modules: tuple[str, ...]
    ref: str  # how it was named, e.g. "merge base 1a2b3c4d5e6f" or "v0.1.0"
    sha: str
    specs: Mapping[str, KernelSpec]
    tree: Path
    head_tree: Path
    isolated: Isolated | None = None
    failed: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # The base's modules could not be imported: no worker loads them.
    unloadable: bool = False

    @property
    def where(self) -> tuple[str, tuple[str, ...], str, str]:
        """The base as a worker loads it (``kernel_side.base_isolated``)."""
        return (str(self.root), self.modules, str(self.head_tree), str(self.tree))

    @property
    def paired(self) -> set[str]:
        """The kernels measured head against base."""
        return set(self.specs) - set(self.failed)

    @property
    def label(self) -> str:
        return self.ref if self.sha[:12] in self.ref else f"{self.ref} ({self.sha[:12]})"


@contextlib.contextmanager
def worker_runs(bench: Bench, base: BaseCheckout | None = None) -> Iterator[Runs]:
    """The real port: worker processes for this session (and the base's kernels, for A/B)."""
    from ci_bench.measure.workers import Pool, WorkerError, WorkerSetup, default_workers, pin_env

    request, device = bench.request, bench.meta.device
    count = request.workers.count or default_workers(device)
    setup = WorkerSetup(
        modules=list(request.modules),
        root=str(request.config.root),
        settings=dataclasses.asdict(bench.harness),
        device=device.model_dump(mode="json"),
        peak_tflops=request.peak_tflops,
        peak_gbps=request.peak_gbps,
        cache_dir=bench.meta.settings.compilation_cache,
    )
    if base is not None and not base.unloadable:
        setup = dataclasses.replace(
            setup,
            base_root=str(base.root),
            base_modules=list(base.modules),
            base_tree=str(base.tree),
            head_tree=str(base.head_tree),
        )
    pool = Pool(
        setup,
        [pin_env(device.platform, i) for i in range(count)],
        case_timeout=request.workers.case_timeout,
        adopt=bench.process.adopt() if bench.process is not None else None,
    )

    class _PoolRuns:
        def run(self, jobs: Sequence[Job], failed: Failed, started: Started, done: Done) -> None:
            try:
                pool.run(jobs, failed, done, started)
            except WorkerError as exc:
                raise InputError(f"{exc} (the results so far are saved)") from None

    try:
        yield _PoolRuns()
    finally:
        pool.close()


@dataclass
class InProcess:
    """Jobs measured one after another in this process: no time limit, no isolation."""

    bench: Bench
    base: BaseCheckout | None = None

    def run(self, jobs: Sequence[Job], failed: Failed, started: Started, done: Done) -> None:
        from ci_bench.measure.runner import measure_case, measure_pair

        settings, peaks = self.bench.harness, self.bench.peaks
        for i, job in enumerate(jobs):
            started(i)
            head = self.bench.specs[job.case.kernel]
            if not job.pair:
                done(i, [measure_case(head, job.case, settings, peaks)])
                continue
            assert self.base is not None
            isolated = self.base.isolated
            assert isolated is not None
            base = self.base.specs[job.case.kernel]
            seed = job.order_seed or job.case.id
            with isolated.sides.held():
                paired = isolated.head({job.case.kernel: head})[job.case.kernel]
                done(i, measure_pair(paired, base, job.case, settings, peaks, seed))


@contextlib.contextmanager
def in_process_runs(bench: Bench, base: BaseCheckout | None = None) -> Iterator[Runs]:
    """The in-process port (the pytest helper): no workers, no time limit."""
    yield InProcess(bench, base)


def _failed(bench: Bench, base: BaseCheckout | None) -> Failed:
    """A job that hung or killed its worker: an error result for each contestant."""
    from ci_bench.measure.harness import error_result

    def failed(job: Job, message: str) -> list[CaseResult]:
        head = error_result(bench.specs[job.case.kernel], job.case, message)
        if not job.pair or base is None:
            return [head]
        # Whose fault it was is not known yet (base_side_failures finds out): never the
        # base's own failure, so never "also failing at the merge base".
        alone = f"{PAIR_FAILED}{message}"
        return [head, error_result(base.specs[job.case.kernel], job.case, alone)]

    return failed


def resume_from(path: Path, bench: Bench) -> tuple[RunMeta, list[CaseResult]]:
    """The cases to keep from ``path``; refuses (exit 2) a file of other settings."""
    from ci_bench.measure.runner import kept_cases, resumable
    from ci_bench.schema import RESULTS_READABLE
    from ci_bench.store.files import read_model

    previous = read_model(path, Results, what="results", schema_version=RESULTS_READABLE)
    why = resumable(previous, bench.meta)
    if why is not None:
        raise InputError(f"{path}: cannot resume: {why}")
    kept = kept_cases(previous, bench.specs)
    bench.progress.note(f"resuming {path}: {len(kept)} case(s) already measured")
    return bench.meta.model_copy(update={"started_at": previous.meta.started_at}), kept


def measure(bench: Bench, runs: Runs, save: Save, resume: Path | None = None) -> Results:
    """The session's cases, saving the growing results after every case; with ``resume``,
    only the cases that file does not hold yet."""
    from ci_bench.measure.runner import run_all

    meta, previous = bench.meta, []
    if resume is not None and resume.exists():
        meta, previous = resume_from(resume, bench)
    if not bench.cases:
        bench.progress.note("the selection is empty: nothing to measure")
    failed = _failed(bench, None)

    def execute(cases: Sequence[Case], started: Started, done: Callable[[int, CaseResult], None]):
        runs.run([Job(c) for c in cases], failed, started, lambda i, rs: done(i, rs[0]))

    return run_all(
        bench.specs,
        list(bench.cases),
        bench.harness,
        meta,
        bench.peaks,
        progress=bench.progress,
        save=save,
        now=bench.now,
        execute=execute,
        previous=previous,
    )


def _order_seed(bench: Bench, case: Case, again: bool) -> str:
    """The shuffled round order of a pair: fixed per case, whichever worker measures it."""
    return f"{bench.harness.seed + int(again)}:{case.id}"


def measure_pairs(bench: Bench, runs: Runs, base: BaseCheckout) -> tuple[Results, list[CaseResult]]:
    """Every selected case, head against base where the base has the kernel (else head
    alone), interleaved round by round in one worker per pair."""
    cases = list(bench.cases)
    paired = base.paired
    jobs = [Job(c, pair=c.kernel in paired, order_seed=_order_seed(bench, c, False)) for c in cases]
    found: dict[int, list[CaseResult]] = {}

    def started(i: int) -> None:
        bench.progress.start(i + 1, len(cases), cases[i])

    def done(i: int, results: list[CaseResult]) -> None:
        found[i] = results
        bench.progress.done(i + 1, len(cases), results[0])

    runs.run(jobs, _failed(bench, base), started, done)
    heads = [found[i][0] for i in range(len(cases))]
    bases = [found[i][1] for i in range(len(cases)) if len(found[i]) > 1]
    return Results(meta=bench.finished(), cases=heads), bases


def remeasure(
    bench: Bench,
    runs: Runs,
    measured: Sequence[CaseResult],
    ids: set[str],
    *,
    base: BaseCheckout | None = None,
    bases: Sequence[CaseResult] = (),
) -> tuple[list[CaseResult], list[CaseResult]]:
    """The confirmation pass for any mode: measure the flagged cases once more (head alone,
    or head and base as a pair) and keep both measurements (``confirmation``) on each
    result. A re-measurement that failed leaves the case as first measured."""
    cases = [c for c in bench.cases if c.id in ids]
    pair = base is not None
    jobs = [Job(c, pair=pair, order_seed=_order_seed(bench, c, True)) for c in cases]
    again: dict[str, list[CaseResult]] = {}

    def started(i: int) -> None:
        sys.stderr.write(f"ci-bench: re-measuring {cases[i].id}\n")

    def done(i: int, results: list[CaseResult]) -> None:
        if all(r.status == "ok" for r in results):
            again[cases[i].id] = results

    runs.run(jobs, _failed(bench, base), started, done)

    def updated(side: int, results: Sequence[CaseResult]) -> list[CaseResult]:
        return [
            r.model_copy(update={"confirmation": again[r.id][side].pallas}) if r.id in again else r
            for r in results
        ]

    return updated(0, measured), updated(1, bases) if pair else list(bases)


def confirmed(report: Report, rejudge: Callable[[set[str]], Report], enabled: bool) -> Report:
    """Flag, re-measure, judge again: the one confirmation flow of every mode.

    Both directions are re-measured: an unreproduced speed-up is as false a claim in the
    comment as an unreproduced slow-down. The cost: a run whose every case reads faster
    than its baseline (a stale one) measures twice, as one that reads slower already did."""
    flagged = {v.id for v in report.cases if v.verdict in FLAGGED}
    if not flagged or not enabled:
        return report
    sys.stderr.write(f"ci-bench: re-measuring {len(flagged)} flagged case(s)\n")
    return rejudge(flagged)


def base_side_failures(
    bench: Bench, runs: Runs, results: Results, bases: list[CaseResult]
) -> tuple[Results, list[CaseResult]]:
    """A pair that hung or crashed its worker fails on both sides; whose fault it was is
    found by measuring the head alone. A head that is fine is measured alone (judged
    against the baseline) and the base's failure is named as the base's, never the PR's."""
    base_of = {b.id: b for b in bases}
    both = [
        c
        for c in results.cases
        if c.status != "ok"
        and c.id in base_of
        and (base_of[c.id].error or "").startswith(PAIR_FAILED)
    ]
    if not both:
        return results, bases
    wanted = {c.id for c in both}
    cases = [c for c in bench.cases if c.id in wanted]
    alone: dict[str, CaseResult] = {}

    def done(i: int, found: list[CaseResult]) -> None:
        alone[cases[i].id] = found[0]

    runs.run([Job(c) for c in cases], _failed(bench, None), lambda i: None, done)
    heads, fixed = [], dict(base_of)
    for case in results.cases:
        head = alone.get(case.id)
        if head is None or head.status != "ok":
            heads.append(case)
            continue
        why = (base_of[case.id].error or "error").removeprefix(PAIR_FAILED)
        kind = "hung" if "timed out" in why else "crashed"
        note = f"the merge base's kernel {kind} ({why}); head measured alone"
        heads.append(head)
        fixed[case.id] = base_of[case.id].model_copy(update={"error": note})
    return results.model_copy(update={"cases": heads}), [fixed[b.id] for b in bases]
