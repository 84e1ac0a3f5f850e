"""A measuring session: jax configured, device fingerprinted, git read, peaks resolved ONCE.

Every pass of a command (the run, the confirmation pass, A/B) measures through one
``Bench``, so they share one run's metadata; ``pipeline.measuring`` runs the passes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ci_bench import __version__
from ci_bench.contract.matrix import expand, profile_notes, select, shard
from ci_bench.contract.registry import load_kernels
from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.errors import InputError
from ci_bench.measure.progress import Progress
from ci_bench.measure.settings import HarnessSettings
from ci_bench.pipeline.git import git_info
from ci_bench.pipeline.parts import Selection
from ci_bench.pipeline.request import Request
from ci_bench.schema import RunMeta, RunSettings

if TYPE_CHECKING:
    from ci_bench.measure.kernel_process import KernelProcess
    from ci_bench.measure.roofline import PeakLookup
    from ci_bench.schema import DeviceFingerprint


def utc_now() -> datetime:
    """The clock at the edge: run metadata timestamps."""
    return datetime.now(UTC)


def load_specs(request: Request) -> Mapping[str, KernelSpec]:
    """The kernels imported in this process: for commands whose job is to run one
    kernel's code here (``lower``, ``tune``, the pytest helper); the measuring
    commands describe them in a worker instead (``pipeline.kernels``)."""
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
    # The worker that described the kernels: the measuring pool's first worker.
    process: KernelProcess | None = None

    def finished(self) -> RunMeta:
        return self.meta.model_copy(update={"finished_at": self.now(), "complete": True})


def open_bench(
    request: Request,
    specs: Mapping[str, KernelSpec],
    env: Mapping[str, str],
    harness: HarnessSettings | None = None,
    *,
    in_process: bool = False,
    cases: Sequence[Case] | None = None,
    device: DeviceFingerprint | None = None,
    process: KernelProcess | None = None,
) -> Bench:
    """Configure jax, fingerprint the device, read git: once per command.

    Unless the command measures ``in_process`` (the pytest helper) or the host has no
    accelerator, a child process reads the fingerprint: this process must not hold the
    accelerator its workers need; then jax here is told to use the CPU alone. ``cases``
    replaces the selection's (one case by id); ``device`` is the fingerprint already read
    and ``process`` the worker that described ``specs`` (``pipeline.kernels``).
    """
    from ci_bench.measure.devices import cpu_only_here, fingerprint
    from ci_bench.measure.interpret import kernel_modes
    from ci_bench.measure.roofline import peak_lookup
    from ci_bench.measure.runner import configure_jax
    from ci_bench.measure.timers import default_timer
    from ci_bench.measure.workers import accelerator_present
    from ci_bench.pipeline.kernels import read_device

    adhoc_cases = cases is not None
    cases = list(cases) if cases is not None else cases_for(request.selection, specs)
    settings = harness or request.harness
    isolated = not in_process and accelerator_present(env)
    if isolated:
        cpu_only_here()
    if device is None:
        device = fingerprint() if in_process else read_device(env)
    # The interpret mode starts jax's backend: not in a parent whose workers need the chip.
    mode = configure_jax(request.compilation_cache, None if isolated else request.cpu.mode)
    settings = replace(
        settings,
        timer=settings.timer or default_timer(device.platform),
        interpret_mode=request.cpu.mode,
        kernel_interpret=kernel_modes(
            specs, request.cpu.mode, request.cpu.forced, request.cpu.tpu_kernels
        ),
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
            kernel_interpret=dict(settings.kernel_interpret) if device.platform == "cpu" else {},
            lowered_for=request.lower,
            compilation_cache=str(cache) if cache else None,
            timer=settings.timer,
        ),
        kernels={name: specs[name].version for name in dict.fromkeys(c.kernel for c in cases)},
        matrix=[c.id for c in cases]
        if adhoc_cases
        else [c.id for c in matrix_of(selection, specs)],
    )
    peaks = peak_lookup(device.device_kind, device.platform, request.peak_tflops, request.peak_gbps)
    progress = Progress(sys.stderr, live=sys.stderr.isatty(), quiet=request.outputs.quiet)
    if selection.profile is not None:
        for note in profile_notes(specs, selection.profile, selection.kernels):
            progress.note(f"note: {note}")
    return Bench(request, specs, tuple(cases), settings, meta, peaks, progress, process=process)
