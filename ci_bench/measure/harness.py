"""Timing harness: the specification's benchmark_single, a correctness gate, per-case isolation.

A case times its implementations (the subject, the others, the baseline) in one mode, in
interleaved rounds; every implementation but the baseline is checked against the reference
first (outputs, and gradients in the backward modes). The clock is a parameter
(``time.perf_counter`` by default) so tests can drive it.
"""

from __future__ import annotations

import functools
import operator
import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax

from ci_bench.contract.spec import Case, KernelSpec, as_inputs
from ci_bench.measure.compiled import bytes_model_check, compile_workload, cost_model_check
from ci_bench.measure.contestants import Contestant, check, expected, lineup
from ci_bench.measure.correctness import check_outputs
from ci_bench.measure.failures import full_traceback, with_hint
from ci_bench.measure.modes import cast_like, cotangent_like, differentiable, mode_costs, workload
from ci_bench.measure.roofline import PeakLookup, compute_metrics, tflops_of
from ci_bench.measure.settings import Adaptive, HarnessSettings
from ci_bench.measure.timers import Timed, timed_rounds
from ci_bench.measure.yardstick import Yardstick, yardstick
from ci_bench.samples import relative_ci_width, stats_of
from ci_bench.schema import (
    NOT_MEASURED,
    CaseResult,
    CompileTimes,
    DispatchOverhead,
    Implementations,
    OtherImplementation,
)
from ci_bench.schema.timers import SPECIFICATION_TIMER
from ci_bench.text import one_line

__all__ = [
    "NOT_MEASURED",
    "Clock",
    "HarnessSettings",
    "PeakLookup",
    "benchmark_single",
    "bytes_model_check",
    "check_outputs",
    "cost_model_check",
    "error_result",
    "run_case",
    "run_contestants",
    "stats_of",
    "time_interleaved",
]

Clock = Callable[[], float]


def benchmark_single(
    fn: Callable[..., Any],
    *args: Any,
    warmup: int = 5,
    repeats: int = 20,
    clock: Clock = time.perf_counter,
) -> dict[str, float]:
    """The specification's benchmark_single, verbatim in behaviour: warmup, timed runs, stats."""
    (times,) = time_interleaved([fn], args, warmup=warmup, repeats=repeats, clock=clock)
    return stats_of(times, warmup).model_dump(include={"mean_ms", "min_ms", "max_ms", "std_ms"})


def _precise_enough(samples: list[list[float]], target: float) -> bool:
    return all(relative_ci_width(s) <= target for s in samples)


def time_interleaved(
    fns: Sequence[Callable[..., Any]],
    args: Sequence[Any],
    *,
    warmup: int,
    repeats: int,
    clock: Clock = time.perf_counter,
    adaptive: Adaptive | None = None,
    rng: random.Random | None = None,
) -> list[list[float]]:
    """Seconds per repeat for each fn, timed in alternating rounds.

    Round r times every fn once, in forward order on even rounds and reverse order on odd
    ones (or in an order shuffled by ``rng``), so drift (thermal, a noisy neighbour) and
    order effects hit all fns alike. With ``adaptive``, ``repeats`` is the minimum and
    rounds go on until the precision target or the time cap is reached.
    """
    for _ in range(warmup):
        for fn in fns:
            jax.block_until_ready(fn(*args))
    samples: list[list[float]] = [[] for _ in fns]
    order = list(range(len(fns)))
    began = clock() if adaptive is not None else 0.0  # only the time cap reads it
    r = 0
    while True:
        if r >= repeats:
            if adaptive is None or r >= adaptive.max_repeats:
                break
            if (r - repeats) % adaptive.check_every == 0 and (
                clock() - began >= adaptive.max_seconds or _precise_enough(samples, adaptive.target)
            ):
                break
        if rng is not None:
            rng.shuffle(order)
        for i in order if (r % 2 == 0 or rng is not None) else reversed(order):
            start = clock()
            jax.block_until_ready(fns[i](*args))
            samples[i].append(clock() - start)
        r += 1
    return samples


def _identity(spec: KernelSpec, case: Case) -> dict[str, Any]:
    return {
        "id": case.id,
        "kernel": spec.name,
        "version": spec.version,
        "params": dict(case.params),
        "shape": list(case.params.values()),
        "dtype": case.dtype,
        "mode": case.mode,
    }


def error_result(spec: KernelSpec, case: Case, message: str) -> CaseResult:
    """A case that could not be measured (its worker hung or died)."""
    names = Implementations(subject=spec.subject, baseline=spec.baseline)
    return CaseResult(**_identity(spec, case), status="error", error=message, implementations=names)


def run_case(
    spec: KernelSpec,
    case: Case,
    settings: HarnessSettings,
    peaks: PeakLookup,
    clock: Clock = time.perf_counter,
) -> CaseResult:
    """Measure one case; any failure becomes an ``error`` result, never an exception."""
    return run_contestants([spec], case, settings, peaks, clock)[0]


def run_contestants(
    specs: Sequence[KernelSpec],
    case: Case,
    settings: HarnessSettings,
    peaks: PeakLookup,
    clock: Clock = time.perf_counter,
    rng: random.Random | None = None,
) -> list[CaseResult]:
    """Measure the subjects of ``specs`` (e.g. head and base) and the first spec's other
    implementations and baseline on the same inputs, in the case's mode, in one process,
    round by round; one result per spec.

    Per implementation: its workload (backward: the VJP once, outside the timed region),
    compiled (timed, with XLA's memory and cost analyses) and called once; every one but
    the baseline checked against the first spec's reference. Then warmup and interleaved
    timed rounds of every executable (alternating order, or shuffled each round with
    ``rng``). A failure anywhere makes every result an error.
    """
    first = specs[0]
    people = lineup(specs)
    inputs_ms: float | None = None

    def failed(
        message: str, culprit: int | None = None, trace: str | None = None
    ) -> list[CaseResult]:
        results = []
        for i, spec in enumerate(specs):
            if culprit not in (None, i):
                other = specs[culprit]  # type: ignore[index]
                error = f"{NOT_MEASURED} {other.name} v{other.version} failed: {message}"
            else:
                error = message
            mine = next(c for c in people if c.spec == i and c.role == "subject")
            results.append(
                CaseResult(
                    **_identity(spec, case),
                    status="error",
                    error=error,
                    compile=CompileTimes(pallas_ms=mine.compile_ms),
                    analysis={"pallas": mine.stats} if mine.stats else {},
                    correctness=mine.correctness,
                    gradients=mine.gradients,
                    implementations=Implementations(subject=spec.subject, baseline=first.baseline),
                    inputs_ms=inputs_ms,
                    traceback=trace if culprit in (None, i) else None,
                )
            )
        return results

    current: Contestant | None = None
    try:
        began = clock()
        inputs = as_inputs(first.make_inputs(case, jax.random.PRNGKey(settings.seed)), first.name)
        jax.block_until_ready(inputs)
        inputs_ms = (clock() - began) * 1000
        diff = differentiable(first, inputs) if case.mode != "forward" else ()
        if case.mode != "forward" and not diff:
            raise ValueError(f"mode {case.mode} needs a floating-point input to differentiate")
        flops, flops_source, nbytes, bytes_source = mode_costs(first, case, inputs, diff)
        ct = None
        if case.mode != "forward":
            ct = cotangent_like(jax.eval_shape(people[0].fn, *inputs), settings.seed)
        want = expected(first, case, inputs, diff, ct)
        for current in people:
            own_ct = cast_like(ct, jax.eval_shape(current.fn, *inputs)) if ct is not None else None
            current.work = workload(current.fn, case.mode, inputs, diff, own_ct)
            current.exe, current.compile_ms, current.stats = compile_workload(
                current.work.fn, current.work.args, clock
            )
            got = jax.block_until_ready(current.exe(*current.work.args))
            problem = None if current.role == "baseline" else check(first, case, current, got, want)
            del got
            if problem:
                return failed(problem, current.spec)
        current = None
        del want
        native = people[-1]
        assert native.work is not None
        # What the cost models are checked against: the native's dot FLOPs, or XLA's FLOPs
        # without conversions, and how many passes it compiled to (measure.yardstick).
        reference = yardstick(native.work.fn, native.work.args, native.exe)
        fns, args = _calls(people)
        timed = timed_rounds(
            settings.timer or SPECIFICATION_TIMER,
            time_interleaved,
            fns,
            args,
            warmup=settings.warmup,
            repeats=settings.repeats,
            clock=clock,
            adaptive=settings.adaptive,
            rng=rng,
        )
    except Exception as exc:  # a case failing must never stop the others; recorded
        culprit = current.spec if current is not None and current.role != "baseline" else None
        message = with_hint(one_line(exc))
        return failed(current.label(message) if current else message, culprit, full_traceback(exc))
    return _results(
        specs,
        case,
        settings,
        peaks,
        people,
        timed,
        inputs_ms,
        (flops, flops_source, nbytes, bytes_source),
        reference,
    )


def _calls(people: Sequence[Contestant]) -> tuple[list[Callable[..., Any]], tuple[Any, ...]]:
    """The executables and their arguments for the timed rounds: shared arguments where
    every workload has the same (forward), else each call bound to its own."""
    works = [c.work for c in people if c.work is not None]
    assert len(works) == len(people)
    shared = works[0].args
    if all(len(w.args) == len(shared) and all(map(operator.is_, w.args, shared)) for w in works):
        return [c.exe for c in people], shared
    return [functools.partial(c.exe, *w.args) for c, w in zip(people, works, strict=True)], ()


def _results(
    specs: Sequence[KernelSpec],
    case: Case,
    settings: HarnessSettings,
    peaks: PeakLookup,
    people: Sequence[Contestant],
    timed: Timed,
    inputs_ms: float | None,
    costs: tuple[int, str, int, str],
    reference: Yardstick,
) -> list[CaseResult]:
    first = specs[0]
    flops, flops_source, nbytes, bytes_source = costs
    stats = [stats_of(s, settings.warmup) for s in timed.samples]
    base_at = len(people) - 1
    baseline, base_stats = stats[base_at], people[base_at].stats
    assert base_stats is not None

    def speedup(mean_ms: float) -> float | None:
        return baseline.mean_ms / mean_ms if mean_ms > 0 else None

    others = {
        c.name: OtherImplementation(
            timing=stats[i],
            speedup=speedup(stats[i].mean_ms),
            compile_ms=c.compile_ms,
            correctness=c.correctness,
            gradients=c.gradients,
            analysis=c.stats,
        )
        for i, c in enumerate(people)
        if c.role == "other"
    }
    peak_tflops, peak_gbps = peaks(case.dtype)
    results = []
    for i, spec in enumerate(specs):
        at = next(j for j, c in enumerate(people) if c.spec == i and c.role == "subject")
        mine, subject = people[at], stats[at]
        assert mine.stats is not None
        results.append(
            CaseResult(
                **_identity(spec, case),
                status="ok",
                pallas=subject,
                native=baseline,
                speedup=speedup(subject.mean_ms),
                tflops=tflops_of(flops, subject.mean_ms),
                metrics=compute_metrics(
                    flops=flops,
                    bytes_accessed=nbytes,
                    mean_ms=subject.mean_ms,
                    peak_tflops=peak_tflops,
                    peak_gbps=peak_gbps,
                    compute_unit=first.compute_unit,
                ).model_copy(update={"flops_source": flops_source, "bytes_source": bytes_source}),
                compile=CompileTimes(
                    pallas_ms=mine.compile_ms, native_ms=people[base_at].compile_ms
                ),
                analysis={"pallas": mine.stats, "native": base_stats},
                cost_check=cost_model_check(
                    flops, base_stats, settings.cost_model_factor, reference, first.compute_unit
                ),
                bytes_check=bytes_model_check(
                    nbytes, base_stats, settings.cost_model_factor, reference
                ),
                correctness=mine.correctness,
                gradients=mine.gradients,
                implementations=Implementations(
                    subject=spec.subject, baseline=first.baseline, others=others if i == 0 else {}
                ),
                dispatch=dispatch_of(timed, {"pallas": at, "native": base_at}),
                inputs_ms=inputs_ms,
            )
        )
    return results


def dispatch_of(timed: Timed, which: dict[str, int]) -> dict[str, DispatchOverhead]:
    """Median wall, device and (wall - device) per call, where the timer saw the device."""
    if timed.device is None:
        return {}
    out = {}
    for name, i in which.items():
        wall, device = timed.wall[i], timed.device[i]
        out[name] = DispatchOverhead(
            wall_median_ms=statistics.median(wall) * 1000,
            device_median_ms=statistics.median(device) * 1000,
            overhead_median_ms=statistics.median(w - d for w, d in zip(wall, device, strict=True))
            * 1000,
        )
    return out
