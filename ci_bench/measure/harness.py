"""Timing harness: the specification's benchmark_single, a correctness gate, per-case isolation.

The clock is a parameter (``time.perf_counter`` by default) so tests can drive it.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from ci_bench.contract.spec import Case, KernelSpec, Tolerance, as_inputs
from ci_bench.judge.stats import relative_ci_width, stats_of
from ci_bench.measure.failures import full_traceback, with_hint
from ci_bench.measure.roofline import PeakLookup, compute_metrics, tflops_of
from ci_bench.measure.settings import Adaptive, HarnessSettings
from ci_bench.measure.timers import Timed, timed_rounds
from ci_bench.schema import (
    BytesModelCheck,
    CaseResult,
    CompiledStats,
    CompileTimes,
    Correctness,
    CostModelCheck,
    DispatchOverhead,
    MemoryStats,
    XlaCost,
)
from ci_bench.text import one_line

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


@jax.jit
def _error_stats(out: jax.Array, ref: jax.Array, atol: float, rtol: float) -> tuple[jax.Array, ...]:
    out = out.astype(jnp.float32)
    ref = ref.astype(jnp.float32)
    diff = jnp.abs(out - ref)
    allowed = atol + rtol * jnp.abs(ref)
    mismatched = jnp.sum(~(diff <= allowed))  # NaN counts as a mismatch
    finite = jnp.all(jnp.isfinite(out))
    significant = jnp.abs(ref) > atol
    rel = jnp.where(significant, diff / jnp.where(significant, jnp.abs(ref), 1.0), 0.0)
    nan, inf = jnp.sum(jnp.isnan(out)), jnp.sum(jnp.isinf(out))
    ref_bad = jnp.sum(~jnp.isfinite(ref))
    return (
        mismatched,
        jnp.max(diff, initial=0.0),
        jnp.max(rel, initial=0.0),
        finite,
        nan,
        inf,
        ref_bad,
    )


def check_outputs(out: Any, ref: Any, tol: Tolerance) -> Correctness:
    """Elementwise ``|out - ref| <= atol + rtol * |ref|`` over every output leaf, in float32."""
    out_leaves, out_tree = jax.tree.flatten(out)
    ref_leaves, ref_tree = jax.tree.flatten(ref)
    if out_tree != ref_tree:
        raise ValueError(f"output structure {out_tree} differs from reference {ref_tree}")
    mismatched = elements = nans = infs = ref_bad = 0
    max_abs = max_rel = 0.0
    all_finite = True
    for o, r in zip(out_leaves, ref_leaves, strict=True):
        if o.shape != r.shape:
            raise ValueError(f"output shape {o.shape} differs from reference {r.shape}")
        bad, abs_err, rel_err, finite, nan, inf, rbad = _error_stats(o, r, tol.atol, tol.rtol)
        nans, infs, ref_bad = nans + int(nan), infs + int(inf), ref_bad + int(rbad)
        mismatched += int(bad)
        elements += int(o.size)
        max_abs = max(max_abs, float(abs_err))
        max_rel = max(max_rel, float(rel_err))
        all_finite = all_finite and bool(finite)
    return Correctness(
        ok=mismatched == 0,
        max_abs_err=max_abs if all_finite else None,
        max_rel_err=max_rel if all_finite else None,
        atol=tol.atol,
        rtol=tol.rtol,
        mismatched=mismatched,
        elements=elements,
        nan=nans,
        inf=infs,
        reference_nonfinite=ref_bad,
    )


# Error prefix of a contestant that was fine but could not be timed because another failed.
NOT_MEASURED = "not measured:"


def _compile(
    fn: Callable[..., Any], inputs: Sequence[Any], clock: Clock
) -> tuple[Any, float, CompiledStats]:
    """Trace and compile once (timed), and read XLA's memory and cost analyses."""
    start = clock()
    lowered = jax.jit(fn).lower(*inputs)
    compiled = lowered.compile()
    compile_ms = (clock() - start) * 1000
    return compiled, compile_ms, _analyse(lowered, compiled)


def _analyse(lowered: Any, compiled: Any) -> CompiledStats:
    memory = cost = None
    try:
        m = compiled.memory_analysis()
    except (NotImplementedError, RuntimeError):  # backends without the analysis
        m = None
    if m is not None:
        memory = MemoryStats(
            argument_bytes=m.argument_size_in_bytes,
            output_bytes=m.output_size_in_bytes,
            temp_bytes=m.temp_size_in_bytes,
            alias_bytes=m.alias_size_in_bytes,
            generated_code_bytes=m.generated_code_size_in_bytes,
            peak_bytes=getattr(m, "peak_memory_in_bytes", 0)
            or m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes,
        )
    try:
        raw = compiled.cost_analysis()
    except (NotImplementedError, RuntimeError):
        raw = None
    if isinstance(raw, list):  # older jax returns one dict per computation
        raw = raw[0] if raw else None
    if raw:
        cost = XlaCost(
            flops=raw.get("flops"),
            bytes_accessed=raw.get("bytes accessed"),
            has_loops="stablehlo.while" in lowered.as_text(),
        )
    return CompiledStats(memory=memory, cost=cost)


def cost_model_check(model_flops: int, native: CompiledStats, factor: float) -> CostModelCheck:
    """Compare the kernel's FLOPs model with XLA's count for the native implementation."""
    cost = native.cost
    if cost is None or not cost.flops:
        return CostModelCheck(
            model_flops=model_flops,
            xla_flops=None,
            ratio=None,
            status="unverifiable",
            reason="XLA reported no FLOPs for the native implementation",
        )
    ratio = model_flops / cost.flops
    if cost.has_loops:
        status, reason = "unverifiable", "the native implementation loops: XLA counts a body once"
    elif max(ratio, 1 / ratio if ratio else float("inf")) > factor:
        status = "mismatch"
        reason = f"FLOPs model is {ratio:.3g}× XLA's count for the native implementation"
    else:
        status, reason = "ok", f"FLOPs model within {factor:g}× of XLA's count"
    return CostModelCheck(
        model_flops=model_flops, xla_flops=cost.flops, ratio=ratio, status=status, reason=reason
    )


def bytes_model_check(model_bytes: int, native: CompiledStats, factor: float) -> BytesModelCheck:
    """The kernel's bytes model against XLA's bytes-accessed for the native implementation.

    Unverifiable when XLA gives no figure or the native code loops (a body counted once);
    a mismatch is a warning only: XLA's figure moves with fusion decisions.
    """
    cost = native.cost
    if cost is None or not cost.bytes_accessed:
        status, reason, ratio = "unverifiable", "XLA reported no bytes for the native code", None
    else:
        ratio = model_bytes / cost.bytes_accessed
        if cost.has_loops:
            status, reason = (
                "unverifiable",
                "the native implementation loops: XLA counts a body once",
            )
        elif max(ratio, 1 / ratio if ratio else float("inf")) > factor:
            status = "mismatch"
            reason = f"bytes model is {ratio:.3g}× XLA's bytes accessed for the native code"
        else:
            status, reason = "ok", f"bytes model within {factor:g}× of XLA's bytes accessed"
    return BytesModelCheck(
        model_bytes=model_bytes,
        xla_bytes=cost.bytes_accessed if cost else None,
        ratio=ratio,
        status=status,
        reason=reason,
    )


def _identity(spec: KernelSpec, case: Case) -> dict[str, Any]:
    return {
        "id": case.id,
        "kernel": spec.name,
        "version": spec.version,
        "params": dict(case.params),
        "shape": list(case.params.values()),
        "dtype": case.dtype,
    }


def error_result(spec: KernelSpec, case: Case, message: str) -> CaseResult:
    """A case that could not be measured (its worker hung or died)."""
    return CaseResult(**_identity(spec, case), status="error", error=message)


def _incorrect(c: Correctness) -> str:
    """ "incorrect: 12 of 1024 outputs are NaN; ..." — non-finite values named first."""
    named = [
        f"{n} of {c.elements} outputs are {what}"
        for n, what in ((c.nan, "NaN"), (c.inf, "Inf"))
        if n
    ]
    if c.reference_nonfinite:
        named.append(f"the reference has {c.reference_nonfinite} NaN/Inf values")
    errors = (
        f"max abs err {c.max_abs_err:.3g}, max rel err {c.max_rel_err:.3g}"
        if c.max_abs_err is not None and c.max_rel_err is not None
        else "errors not finite"
    )
    return "incorrect: " + "; ".join(
        [
            *named,
            f"{c.mismatched} of {c.elements} elements outside "
            f"atol={c.atol} rtol={c.rtol} ({errors})",
        ]
    )


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
    """Measure the Pallas kernels of ``specs`` (e.g. head and base) and the first spec's
    native implementation on the same inputs, in one process, round by round.

    Per Pallas kernel: compile (timed, with XLA's memory and cost analyses) and one call
    checked against the first spec's reference. Then the native implementation, then
    warmup and interleaved timed rounds of every compiled executable (alternating order,
    or shuffled each round with ``rng``). A failure anywhere makes every result an error.
    """
    first = specs[0]
    compiled: list[Any] = []
    compile_ms: list[float] = []
    analyses: list[dict[str, CompiledStats]] = [{} for _ in specs]
    checks: list[Correctness | None] = [None for _ in specs]
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
            times = CompileTimes(pallas_ms=compile_ms[i] if i < len(compile_ms) else None)
            results.append(
                CaseResult(
                    **_identity(spec, case),
                    status="error",
                    error=error,
                    compile=times,
                    analysis=analyses[i],
                    correctness=checks[i],
                    inputs_ms=inputs_ms,
                    traceback=trace if culprit in (None, i) else None,
                )
            )
        return results

    current = 0
    try:
        flops, nbytes = int(first.flops(case)), int(first.bytes_accessed(case))
        began = clock()
        inputs = as_inputs(first.make_inputs(case, jax.random.PRNGKey(settings.seed)), first.name)
        jax.block_until_ready(inputs)
        inputs_ms = (clock() - began) * 1000
        ref = jax.block_until_ready(jax.jit(first.reference)(*inputs))
        for current, spec in enumerate(specs):
            exe, ms, analyses[current]["pallas"] = _compile(spec.pallas, inputs, clock)
            compiled.append(exe)
            compile_ms.append(ms)
            out = jax.block_until_ready(exe(*inputs))
            check = checks[current] = check_outputs(out, ref, first.tolerances[case.dtype])
            del out
            if not check.ok:
                return failed(_incorrect(check), current)
        current = len(specs)
        del ref
        native, native_ms, native_stats_c = _compile(first.native, inputs, clock)
        jax.block_until_ready(native(*inputs))
        timed = timed_rounds(
            settings.timer or "wallclock",
            time_interleaved,
            [*compiled, native],
            inputs,
            warmup=settings.warmup,
            repeats=settings.repeats,
            clock=clock,
            adaptive=settings.adaptive,
            rng=rng,
        )
    except Exception as exc:  # a case failing must never stop the others; recorded
        culprit = current if current < len(specs) else None
        return failed(with_hint(one_line(exc)), culprit, full_traceback(exc))
    samples = timed.samples
    native_stats = stats_of(samples[-1], settings.warmup)
    peak_tflops, peak_gbps = peaks(case.dtype)
    results = []
    for i, spec in enumerate(specs):
        pallas_stats = stats_of(samples[i], settings.warmup)
        analyses[i]["native"] = native_stats_c
        results.append(
            CaseResult(
                **_identity(spec, case),
                status="ok",
                pallas=pallas_stats,
                native=native_stats,
                speedup=native_stats.mean_ms / pallas_stats.mean_ms
                if pallas_stats.mean_ms > 0
                else None,
                tflops=tflops_of(flops, pallas_stats.mean_ms),
                metrics=compute_metrics(
                    flops=flops,
                    bytes_accessed=nbytes,
                    mean_ms=pallas_stats.mean_ms,
                    peak_tflops=peak_tflops,
                    peak_gbps=peak_gbps,
                    compute_unit=first.compute_unit,
                ),
                compile=CompileTimes(pallas_ms=compile_ms[i], native_ms=native_ms),
                analysis=analyses[i],
                cost_check=cost_model_check(flops, native_stats_c, settings.cost_model_factor),
                bytes_check=bytes_model_check(nbytes, native_stats_c, settings.cost_model_factor),
                correctness=checks[i],
                dispatch=dispatch_of(timed, {"pallas": i, "native": len(specs)}),
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
