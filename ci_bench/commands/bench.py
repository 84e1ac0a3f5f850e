"""A measuring session: jax configured, device fingerprinted, git read, peaks resolved ONCE.

Every pass of a command (the run, the confirmation pass, A/B) measures through one
``Bench``, so they share one run's metadata. The confirmation pass lives here, once, for
every mode: flag, re-measure the flagged cases, judge again.
"""

from __future__ import annotations

import dataclasses
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ci_bench import __version__
from ci_bench.commands.git import git_info
from ci_bench.commands.request import Request, Selection
from ci_bench.contract.matrix import expand, profile_notes, select, shard
from ci_bench.contract.registry import load_kernels
from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.errors import InputError
from ci_bench.measure.progress import Progress
from ci_bench.measure.settings import HarnessSettings
from ci_bench.schema import CaseResult, Report, Results, RunMeta, RunSettings

if TYPE_CHECKING:
    from ci_bench.measure.roofline import PeakLookup
    from ci_bench.measure.workers import Pool


def utc_now() -> datetime:
    """The clock at the edge: run metadata timestamps."""
    return datetime.now(UTC)


def load_specs(request: Request) -> Mapping[str, KernelSpec]:
    if not request.modules:
        raise InputError("no kernels configured: add kernels to [tool.ci-bench] or --kernel-module")
    return load_kernels(request.modules, root=request.config.root)


def cases_for(selection: Selection, specs: Mapping[str, KernelSpec]) -> list[Case]:
    """This shard's share of the selection."""
    return shard(matrix_of(selection, specs), selection.shard)


def matrix_of(selection: Selection, specs: Mapping[str, KernelSpec]) -> list[Case]:
    """The whole selection (kernels + profile + globs, or one ad-hoc shape), unsharded."""
    if selection.shape is not None:
        (kernel,) = selection.kernels
        if kernel not in specs:
            raise InputError(f"unknown kernel {kernel!r} (known: {', '.join(specs)})")
        chosen = [specs[kernel].case_from_shape(list(selection.shape), selection.dtype)]
    else:
        assert selection.profile is not None
        chosen = select(expand(specs, selection.profile, selection.kernels), selection.case_globs)
    return chosen


@dataclass(frozen=True)
class Bench:
    """Everything a measurement needs besides the cases; built once per command."""

    request: Request
    specs: Mapping[str, KernelSpec]
    cases: tuple[Case, ...]
    harness: HarnessSettings  # the request's run settings, or its A/B rounds
    meta: RunMeta  # complete=False; finished copies set the end
    peaks: PeakLookup
    progress: Progress
    now: Callable[[], datetime] = utc_now

    def finished(self) -> RunMeta:
        return self.meta.model_copy(update={"finished_at": self.now(), "complete": True})


def open_bench(
    request: Request,
    specs: Mapping[str, KernelSpec],
    env: Mapping[str, str],
    harness: HarnessSettings | None = None,
    *,
    in_process: bool = False,
) -> Bench:
    """Configure jax, fingerprint the device, read git: once per command.

    Unless the command measures ``in_process`` (A/B) or the host has no accelerator, a
    child process reads the fingerprint: this process must not hold the accelerator its
    workers need.
    """
    from ci_bench.measure.devices import fingerprint
    from ci_bench.measure.roofline import peak_lookup
    from ci_bench.measure.runner import configure_jax
    from ci_bench.measure.timers import default_timer
    from ci_bench.measure.workers import WorkerError, accelerator_present, probe

    cases = cases_for(request.selection, specs)
    settings = harness or request.harness
    try:
        isolated = not in_process and accelerator_present(env)
        device = probe(env) if isolated else fingerprint()
    except WorkerError as exc:
        raise InputError(str(exc)) from None
    # The interpret mode starts jax's backend: not in a parent whose workers need the chip.
    mode = configure_jax(request.compilation_cache, None if isolated else request.cpu_interpret)
    settings = replace(
        settings,
        timer=settings.timer or default_timer(device.platform),
        interpret_mode=request.cpu_interpret,
        lower=request.lower,
    )
    selection = request.selection
    cache = request.compilation_cache
    meta = RunMeta(
        tool_version=__version__,
        started_at=utc_now(),
        complete=False,
        profile=selection.profile,
        shard=str(selection.shard) if selection.shard else None,
        case_globs=list(selection.case_globs),
        adhoc=selection.adhoc,
        git=git_info(request.config.root, env.get("GITHUB_SHA"), env.get("GITHUB_REF")),
        device=device,
        settings=RunSettings(
            warmup=settings.warmup,
            repeats=settings.repeats,
            adaptive_target=settings.adaptive.target if settings.adaptive else None,
            adaptive_max_seconds=settings.adaptive.max_seconds if settings.adaptive else None,
            seed=settings.seed,
            interpret=device.platform == "cpu",
            interpret_mode=mode,
            lowered_for=request.lower,
            compilation_cache=str(cache) if cache else None,
            timer=settings.timer,
        ),
        kernels={name: specs[name].version for name in dict.fromkeys(c.kernel for c in cases)},
        matrix=[c.id for c in matrix_of(selection, specs)],
    )
    peaks = peak_lookup(device.device_kind, device.platform, request.peak_tflops, request.peak_gbps)
    progress = Progress(sys.stderr, live=sys.stderr.isatty(), quiet=request.quiet)
    if selection.profile is not None:
        for note in profile_notes(specs, selection.profile, selection.kernels):
            progress.note(f"note: {note}")
    return Bench(request, specs, tuple(cases), settings, meta, peaks, progress)


def start_pool(bench: Bench) -> Pool:
    """Worker processes for this run, each pinned to one accelerator."""
    from ci_bench.measure.workers import Pool, WorkerSetup, default_workers, pin_env

    request, device = bench.request, bench.meta.device
    count = request.workers or default_workers(device)
    setup = WorkerSetup(
        modules=list(request.modules),
        root=str(request.config.root),
        settings=dataclasses.asdict(bench.harness),
        device=device.model_dump(mode="json"),
        peak_tflops=request.peak_tflops,
        peak_gbps=request.peak_gbps,
        cache_dir=bench.meta.settings.compilation_cache,
    )
    pins = [pin_env(device.platform, i) for i in range(count)]
    return Pool(setup, pins, case_timeout=request.case_timeout)


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


def measure(bench: Bench, save: Callable[[Results], None]) -> Results:
    """Measure the bench's cases in worker processes, saving the growing results after
    every case; with ``--resume``, only the cases the file does not hold yet."""
    from ci_bench.measure.runner import in_workers, run_all
    from ci_bench.measure.workers import WorkerError

    meta, previous = bench.meta, []
    if bench.request.resume is not None:
        meta, previous = resume_from(bench.request.resume, bench)
    if not bench.cases:
        bench.progress.note("the selection is empty: nothing to measure")
    pool = start_pool(bench)
    try:
        return run_all(
            bench.specs,
            list(bench.cases),
            bench.harness,
            meta,
            bench.peaks,
            progress=bench.progress,
            save=save,
            now=bench.now,
            execute=in_workers(bench.specs, pool),
            previous=previous,
        )
    except WorkerError as exc:
        raise InputError(f"{exc} (the results so far are saved)") from None
    finally:
        pool.close()


def remeasure(
    bench: Bench,
    contestants: Sequence[Mapping[str, KernelSpec]],
    measured: Sequence[Sequence[CaseResult]],
    ids: set[str],
    harness: HarnessSettings,
) -> list[list[CaseResult]]:
    """The confirmation pass for any mode: measure the flagged cases once more, all
    contestants together (head alone, or head and base interleaved), and keep both
    measurements (``confirmation``) on each contestant's result."""
    from ci_bench.measure.harness import run_contestants

    rng = random.Random(harness.seed + 1) if len(contestants) > 1 else None
    again: dict[str, list[CaseResult]] = {}
    for case in (c for c in bench.cases if c.id in ids):
        sys.stderr.write(f"ci-bench: re-measuring {case.id}\n")
        specs = [side[case.kernel] for side in contestants]
        results = run_contestants(specs, case, harness, bench.peaks, rng=rng)
        if all(r.status == "ok" for r in results):
            again[case.id] = results
    return [
        [
            c.model_copy(update={"confirmation": again[c.id][side].pallas}) if c.id in again else c
            for c in cases
        ]
        for side, cases in enumerate(measured)
    ]


def confirmed(report: Report, rejudge: Callable[[set[str]], Report], enabled: bool) -> Report:
    """Flag, re-measure, judge again: the one confirmation flow of every mode."""
    flagged = {v.id for v in report.cases if v.verdict == "regression"}
    if not flagged or not enabled:
        return report
    sys.stderr.write(f"ci-bench: re-measuring {len(flagged)} flagged case(s)\n")
    return rejudge(flagged)
