"""Timers as strategies: how the per-call time of the interleaved rounds is taken.

``wallclock`` is the specification's ``benchmark_single``: ``perf_counter`` around
``fn(*args)`` plus ``block_until_ready``. It includes Python dispatch and the host-device
round trip, tens of microseconds per call, which on an accelerator can exceed a small
kernel's whole run time.

``profiler`` runs the same interleaved rounds under a ``jax.profiler`` trace and takes each
call's time from the XLA executions the trace recorded (the idea of tokamax's xprof timer:
time kernels from the trace, not the host clock). Wall times of the same calls are kept, so
each case also reports its dispatch overhead (wall - device).

Where the executions live in the trace (checked against jax 0.10's traces):

- TPU/GPU: a ``/device:...`` plane with an ``XLA Modules`` line, one event per execution.
- GPU without that line (the raw trace of jax's CUDA plugin: the ``XLA Modules`` line is
  derived later, by xprof's conversion): the ``/device:GPU:N`` plane's stream lines
  (``Stream #N(...)``, memcpy and memset streams aside) hold CUPTI's kernel events; the
  calls are told apart by the gaps between them (each call blocks until done, so the host's
  return and next dispatch separate two calls by more than the launch gap between kernels
  of one call), and a call's device time is the union of its kernels' intervals.
- CPU: the ``/host:CPU`` plane's PJRT client thread (``tf_XLAPjRtCpuClient/...``) carries
  the XLA op events, each with ``hlo_module``, ``hlo_op`` and ``run_id`` stats; one
  execution is the union of its ops' intervals (gaps between ops are not kernel time).
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ci_bench.schema.platforms import platform_of
from ci_bench.schema.timers import TIMER_NAMES, TimerName


def default_timer(platform: str) -> TimerName:
    """The platform table's default (``ci_bench.schema.platforms``): ``profiler`` on TPU,
    where a TPU v5e showed it reads the device's own time and the wall clock mostly the
    host's round trip (issue 50); ``wallclock`` (the specification's) elsewhere."""
    return platform_of(platform).default_timer


class TimerError(RuntimeError):
    """The trace did not hold what the timed calls should have produced."""


@dataclass(frozen=True)
class Timed:
    """Seconds per call, per fn: ``samples`` feed the statistics; ``wall`` and ``device``
    are kept where the timer has both (dispatch overhead = wall - device)."""

    samples: list[list[float]]
    wall: list[list[float]]
    device: list[list[float]] | None = None


Strategy = Callable[..., Timed]
# name -> strategy: each function below registers under its own name, an entry of the timer
# table (``ci_bench.schema.timers``); the module checks that every entry has one.
TIMERS: dict[TimerName, Strategy] = {}


def strategy(fn: Strategy) -> Strategy:
    """Register ``fn`` as the strategy of the timer it is named after."""
    if fn.__name__ not in TIMER_NAMES:
        raise ValueError(f"{fn.__name__} is not in the timer table (ci_bench.schema.timers)")
    TIMERS[fn.__name__] = fn
    return fn


class Interleave(Protocol):
    def __call__(
        self,
        fns: Sequence[Callable[..., Any]],
        args: Sequence[Any],
        *,
        warmup: int,
        repeats: int,
        clock: Callable[[], float],
        adaptive: Any,
        rng: random.Random | None,
    ) -> list[list[float]]: ...


@strategy
def wallclock(
    interleave: Interleave,
    fns: Sequence[Callable[..., Any]],
    args: Sequence[Any],
    **kw: Any,
) -> Timed:
    """The specification's method: host clock around each call."""
    wall = interleave(fns, args, **kw)
    return Timed(samples=wall, wall=wall)


@strategy
def profiler(
    interleave: Interleave,
    fns: Sequence[Callable[..., Any]],
    args: Sequence[Any],
    *,
    warmup: int,
    **kw: Any,
) -> Timed:
    """Warm up untraced, then trace the timed rounds and read each call's device time.

    With adaptive sampling the rounds are traced in blocks (the minimum, then
    ``check_every`` at a time) and the stop rule judges the device times read so far, the
    samples this timer reports, never the wall clock around them."""
    if warmup:  # outside the trace: only timed calls may appear in it
        interleave(fns, args, warmup=warmup, repeats=0, clock=kw["clock"], adaptive=None, rng=None)
    adaptive, clock = kw.pop("adaptive", None), kw["clock"]
    if adaptive is None:
        device, wall = _traced(interleave, fns, args, **kw)
        return Timed(samples=device, wall=wall, device=device)
    from ci_bench.samples import relative_ci_width

    began, repeats = clock(), kw.pop("repeats")
    device, wall = _traced(interleave, fns, args, repeats=repeats, **kw)
    while len(device[0]) < adaptive.max_repeats and clock() - began < adaptive.max_seconds:
        if all(relative_ci_width(s) <= adaptive.target for s in device):
            break
        block = min(adaptive.check_every, adaptive.max_repeats - len(device[0]))
        more_device, more_wall = _traced(interleave, fns, args, repeats=block, **kw)
        device = [d + m for d, m in zip(device, more_device, strict=True)]
        wall = [w + m for w, m in zip(wall, more_wall, strict=True)]
    return Timed(samples=device, wall=wall, device=device)


def _traced(
    interleave: Interleave, fns: Sequence[Callable[..., Any]], args: Sequence[Any], **kw: Any
) -> tuple[list[list[float]], list[list[float]]]:
    """One trace around ``kw["repeats"]`` interleaved rounds: (device, wall) per fn."""
    import jax

    calls: list[int] = []

    def recording(i: int, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*a: Any) -> Any:
            calls.append(i)
            return fn(*a)

        return call

    wrapped = [recording(i, fn) for i, fn in enumerate(fns)]
    with tempfile.TemporaryDirectory(prefix="ci-bench-trace-") as folder:
        jax.profiler.start_trace(folder)
        try:
            wall = interleave(wrapped, args, warmup=0, adaptive=None, **kw)
        finally:
            jax.profiler.stop_trace()
        found = sorted(Path(folder).glob("**/*.xplane.pb"))
        if len(found) != 1:
            raise TimerError(f"profiler timer: expected one trace file, found {len(found)}")
        data = found[0].read_bytes()
    executions = executions_in(jax.profiler.ProfileData.from_serialized_xspace(data), len(calls))
    return assign(executions, calls, len(fns)), wall


@dataclass(frozen=True)
class Execution:
    """One run of a compiled XLA module as the trace saw it."""

    module: str
    start_ns: float
    device_ns: float


def _union_ns(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of (start, end) intervals: overlapping ops count once."""
    total = 0.0
    end = float("-inf")
    for s, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(s, end)
        end = e
    return total


def kernel_executions(profile: Any, calls: int) -> list[Execution]:
    """GPU kernel events of the device planes' streams, cut into ``calls`` executions at the
    ``calls - 1`` widest gaps between kernels (empty when there are no kernel events)."""
    kernels = []
    for plane in profile.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        for line in plane.lines:
            if line.name.startswith("Stream") and not any(
                word in line.name for word in ("Memcpy", "Memset")
            ):
                kernels += [(e.start_ns, e.start_ns + e.duration_ns, e.name) for e in line.events]
    if not kernels or calls < 1:
        return []
    kernels.sort()
    if len(kernels) < calls:
        raise TimerError(
            f"profiler timer: the trace holds {len(kernels)} GPU kernels for {calls} timed calls"
        )
    gaps = [kernels[i + 1][0] - kernels[i][1] for i in range(len(kernels) - 1)]
    cuts = sorted(sorted(range(len(gaps)), key=lambda i: gaps[i], reverse=True)[: calls - 1])
    found, start = [], 0
    for cut in [*cuts, len(kernels) - 1]:
        segment = kernels[start : cut + 1]
        name = "+".join(k[2] for k in segment)
        found.append(Execution(name, segment[0][0], _union_ns((s, e) for s, e, _ in segment)))
        start = cut + 1
    return found


def executions_in(profile: Any, calls: int = 0) -> list[Execution]:
    """Module executions in time order: device planes' ``XLA Modules`` line where there is
    one (TPU/GPU), else a GPU's kernel events cut into ``calls`` executions, else XLA op
    events grouped by ``run_id`` (the CPU client's thread)."""
    per_plane: list[list[Execution]] = []
    for plane in profile.planes:
        if not plane.name.startswith("/device:"):
            continue
        for line in plane.lines:
            if line.name == "XLA Modules":
                per_plane.append(
                    [Execution(e.name, e.start_ns, e.duration_ns) for e in line.events]
                )
    if any(per_plane):
        return sorted(max(per_plane, key=len), key=lambda x: x.start_ns)
    if kernels := kernel_executions(profile, calls):
        return kernels
    runs: dict[tuple[str, Any], list[tuple[float, float]]] = {}
    for plane in profile.planes:
        for line in plane.lines:
            for event in line.events:
                stats = dict(event.stats)
                if "hlo_op" not in stats or "hlo_module" not in stats or "run_id" not in stats:
                    continue
                key = (str(stats["hlo_module"]), stats["run_id"])
                runs.setdefault(key, []).append(
                    (event.start_ns, event.start_ns + event.duration_ns)
                )
    found = [
        Execution(module, min(s for s, _ in spans), _union_ns(spans))
        for (module, _), spans in runs.items()
    ]
    return sorted(found, key=lambda x: x.start_ns)


def assign(executions: Sequence[Execution], calls: Sequence[int], n_fns: int) -> list[list[float]]:
    """Seconds per call, per fn: the k-th execution belongs to the k-th call (every call
    blocks until done, so executions never overlap). Each fn must map to one module name."""
    if len(executions) != len(calls):
        raise TimerError(
            f"profiler timer: the trace holds {len(executions)} XLA executions "
            f"for {len(calls)} timed calls"
        )
    names: dict[int, str] = {}
    out: list[list[float]] = [[] for _ in range(n_fns)]
    for fn, execution in zip(calls, executions, strict=True):
        if names.setdefault(fn, execution.module) != execution.module:
            raise TimerError(
                f"profiler timer: call of {names[fn]} matched an execution of "
                f"{execution.module} in the trace"
            )
        out[fn].append(execution.device_ns / 1e9)
    return out


if missing := [name for name in TIMER_NAMES if name not in TIMERS]:
    raise ImportError(f"timers without a strategy in ci_bench.measure.timers: {missing}")


def timed_rounds(
    name: TimerName,
    interleave: Interleave,
    fns: Sequence[Callable[..., Any]],
    args: Sequence[Any],
    *,
    warmup: int,
    repeats: int,
    clock: Callable[[], float] = time.perf_counter,
    adaptive: Any = None,
    rng: random.Random | None = None,
) -> Timed:
    """Run the interleaved rounds with the named timer."""
    return TIMERS[name](
        interleave,
        fns,
        args,
        warmup=warmup,
        repeats=repeats,
        clock=clock,
        adaptive=adaptive,
        rng=rng,
    )
