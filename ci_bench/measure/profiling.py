"""Profiler traces for xprof / TensorBoard (specification section 3.1).

The specification's recipe, kept exactly: warm up, ``jax.profiler.start_trace``, run the
kernel three times with ``jax.block_until_ready``, ``stop_trace``. Every run goes through ONE
top-level ``jax.jit``: without it, each jnp operation outside the kernel is dispatched as its
own tiny XLA module, the trace shows a swarm of fragmented HLO modules and xprof's per-module
views (Trace Viewer, Graph Viewer, Memory Viewer) can no longer attribute time or memory to
the kernel.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax

from ci_bench.contract.matrix import SelectionError, find_case
from ci_bench.contract.spec import KernelSpec
from ci_bench.errors import CiBenchError
from ci_bench.text import one_line

# What ``pip install xprof`` puts on PATH (its console script ``xprof``); the TensorBoard
# route needs ``pip install xprof tensorboard`` (tensorboard-plugin-profile is now only a
# shim that depends on xprof, which registers the ``profile`` TensorBoard plugin).
XPROF_PORT = 8791


class ProfilingError(CiBenchError):
    """A trace or dump could not be taken (trace already running, kernel failed, no files)."""


@dataclass(frozen=True)
class TraceInfo:
    """Where a trace went: the log dir to hand to a viewer and the run's ``.xplane.pb``."""

    log_dir: Path
    run_dir: Path
    xplane_files: tuple[Path, ...]
    runs: int

    @property
    def commands(self) -> tuple[str, ...]:
        return viewer_commands(self.log_dir)

    def as_json(self) -> dict[str, Any]:
        return {
            "log_dir": str(self.log_dir),
            "run_dir": str(self.run_dir),
            "xplane_files": [str(p) for p in self.xplane_files],
            "runs": self.runs,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TraceInfo:
        files = tuple(Path(p) for p in data["xplane_files"])
        return cls(Path(data["log_dir"]), Path(data["run_dir"]), files, int(data["runs"]))

    def describe(self) -> str:
        """A few lines for a terminal: the files and how to open them."""
        lines = [f"trace: {p}" for p in self.xplane_files]
        lines.append("open with one of:")
        lines += [f"  {cmd}" for cmd in self.commands]
        return "\n".join(lines)


def viewer_commands(log_dir: Path) -> tuple[str, ...]:
    """Shell commands that open a trace log dir: xprof standalone, or TensorBoard."""
    quoted = shlex.quote(str(log_dir))
    return (
        f"xprof --logdir={quoted} --port={XPROF_PORT}",  # pip install xprof
        f"tensorboard --logdir={quoted}",  # pip install xprof tensorboard; open /#profile
    )


def top_level_jit(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` itself when it is already a jitted function, else ``jax.jit(fn)``.

    Re-wrapping a jitted function would also give one module, but keeping the user's jit
    keeps its static arguments and donation settings exactly as benchmarked.
    """
    return fn if callable(getattr(fn, "lower", None)) else jax.jit(fn)


def _xplanes(log_dir: Path) -> dict[Path, int]:
    root = log_dir / "plugins" / "profile"
    return {p: p.stat().st_mtime_ns for p in root.glob("*/*.xplane.pb")} if root.is_dir() else {}


def capture_trace(
    fn: Callable[..., Any], inputs: Sequence[Any], out_dir: Path, *, runs: int = 3
) -> TraceInfo:
    """Trace ``runs`` calls of ``fn(*inputs)`` under one top-level jit into ``out_dir``.

    jax writes ``out_dir/plugins/profile/<timestamp>/<host>.xplane.pb``, the layout xprof and
    TensorBoard expect under ``--logdir out_dir``. Compilation happens in the warmup, outside
    the trace, so the trace holds only execution.
    """
    if runs < 1:
        raise ProfilingError(f"runs must be at least 1, got {runs}")
    jitted = top_level_jit(fn)
    try:
        jax.block_until_ready(jitted(*inputs))
    except Exception as exc:
        raise ProfilingError(f"kernel failed before tracing: {one_line(exc)}") from exc
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ProfilingError(f"cannot create trace dir {out_dir}: {exc.strerror}") from exc
    before = _xplanes(out_dir)
    try:
        jax.profiler.start_trace(str(out_dir))
    except RuntimeError as exc:  # "Profile has already been started..."
        raise ProfilingError(f"cannot start a trace: {one_line(exc)}") from exc
    try:
        for _ in range(runs):
            jax.block_until_ready(jitted(*inputs))
    except Exception as exc:
        raise ProfilingError(f"kernel failed while tracing: {one_line(exc)}") from exc
    finally:
        try:
            jax.profiler.stop_trace()  # writes the trace: a full disk fails here
        except RuntimeError as exc:  # jax's JaxRuntimeError (RESOURCE_EXHAUSTED, ...)
            why = one_line(exc)
            raise ProfilingError(f"cannot write the trace under {out_dir}: {why}") from None
    new = sorted(p for p, mtime in _xplanes(out_dir).items() if before.get(p) != mtime)
    if not new:
        raise ProfilingError(f"the profiler wrote no .xplane.pb under {out_dir}/plugins/profile")
    return TraceInfo(log_dir=out_dir, run_dir=new[0].parent, xplane_files=tuple(new), runs=runs)


def trace_case(
    spec: KernelSpec,
    case_id: str,
    out_dir: Path,
    *,
    runs: int = 3,
    seed: int = 42,
    values: Mapping[str, Any] | None = None,
) -> TraceInfo:
    """Trace one case's Pallas kernel on inputs from ``make_inputs`` (PRNGKey(seed)), in
    the case's mode (a backward case: its VJP alone, the residuals computed first);
    ``values`` set the subject's tunables (the rest keep their defaults)."""
    from ci_bench.contract.tunables import TunablesError, configured
    from ci_bench.measure.modes import concrete_workload

    try:
        case = find_case(spec, case_id)
    except SelectionError as exc:
        raise ProfilingError(str(exc)) from None
    if values:
        try:
            spec = configured(spec, values, case.params)
        except TunablesError as exc:
            raise ProfilingError(str(exc)) from None
    work = concrete_workload(spec, case, seed=seed)
    return capture_trace(work.fn, work.args, out_dir, runs=runs)
