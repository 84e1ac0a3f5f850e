"""A measuring session: jax configured, device fingerprinted, git read, peaks resolved ONCE.

Every pass of a command (the run, the confirmation pass, A/B) measures through one
``Bench``, so they share one run's metadata. The confirmation pass lives here, once, for
every mode: flag, re-measure the flagged cases, judge again.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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


def _configure_jax(cache_dir: Path | None, interpret_mode: str = "kernel") -> str | None:
    """Persistent compilation cache: later runs load compiled kernels instead of recompiling.
    Also the CPU interpret mode; returns the one in force (None off CPU)."""
    import jax

    from ci_bench.measure.interpret import apply_interpret_mode

    mode = apply_interpret_mode("tpu" if interpret_mode == "tpu" else "kernel")

    if cache_dir is not None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", str(cache_dir))
        # Interpret-mode kernels compile in well under the 1 s default threshold.
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return mode


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
) -> Bench:
    """Configure jax, fingerprint the device, read git: once per command."""
    from ci_bench.measure.devices import fingerprint
    from ci_bench.measure.roofline import peak_lookup

    cases = cases_for(request.selection, specs)
    settings = harness or request.harness
    mode = _configure_jax(request.compilation_cache, request.cpu_interpret)
    device = fingerprint()
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


def measure(bench: Bench, save: Callable[[Results], None]) -> Results:
    """Measure the bench's cases, saving the growing results after every case."""
    from ci_bench.measure.runner import run_all

    if not bench.cases:
        bench.progress.note("the selection is empty: nothing to measure")
    precheck = None
    if bench.request.lower:
        from ci_bench.measure.lowering import as_case_error, check_platform, lower_case

        platform, seed = check_platform(bench.request.lower), bench.harness.seed

        def precheck(spec: KernelSpec, case: Case) -> CaseResult | None:
            return as_case_error(lower_case(spec, case, platform, seed))

    return run_all(
        bench.specs,
        list(bench.cases),
        bench.harness,
        bench.meta,
        bench.peaks,
        progress=bench.progress,
        save=save,
        now=bench.now,
        precheck=precheck,
    )


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
