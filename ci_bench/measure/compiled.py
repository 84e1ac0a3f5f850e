"""What XLA says about a compiled workload: compile time, memory and cost analyses, and
the cost models checked against the native implementation (``measure.yardstick``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax

from ci_bench.measure.yardstick import Yardstick
from ci_bench.schema import BytesModelCheck, CompiledStats, CostModelCheck, MemoryStats, XlaCost

Clock = Callable[[], float]


def compile_workload(
    fn: Callable[..., Any], inputs: Sequence[Any], clock: Clock
) -> tuple[Any, float, CompiledStats]:
    """Trace and compile once (timed), and read XLA's memory and cost analyses."""
    start = clock()
    lowered = jax.jit(fn).lower(*inputs)
    compiled = lowered.compile()
    compile_ms = (clock() - start) * 1000
    return compiled, compile_ms, analyse(lowered, compiled)


def analyse(lowered: Any, compiled: Any) -> CompiledStats:
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


_LOOPS = "the native implementation loops: XLA counts a body once"


def _outside(ratio: float, factor: float) -> bool:
    return max(ratio, 1 / ratio if ratio else float("inf")) > factor


def _unverifiable_flops(model_flops: int, reason: str, xla: float | None = None) -> CostModelCheck:
    return CostModelCheck(
        model_flops=model_flops, xla_flops=xla, ratio=None, status="unverifiable", reason=reason
    )


def _flops_verdict(model_flops: int, reference: float, factor: float, what: str) -> CostModelCheck:
    ratio = model_flops / reference
    if _outside(ratio, factor):
        status, reason = "mismatch", f"FLOPs model is {ratio:.3g}× {what}"
    else:
        status, reason = "ok", f"FLOPs model within {factor:g}× of {what} ({ratio:.3g}×)"
    return CostModelCheck(
        model_flops=model_flops, xla_flops=reference, ratio=ratio, status=status, reason=reason
    )


def cost_model_check(
    model_flops: int,
    native: CompiledStats,
    factor: float,
    yardstick: Yardstick | None = None,
    compute_unit: str = "vector",
) -> CostModelCheck:
    """The kernel's FLOPs model against the native implementation, like with like
    (``measure.yardstick``): the native's dot FLOPs for a matrix-unit kernel, XLA's FLOPs
    without conversions for a vector kernel; XLA's compiled total without a yardstick."""
    if yardstick is not None and compute_unit == "matrix":
        if yardstick.dot_flops is None:
            reason = "the native implementation loops an unknown number of times"
            return _unverifiable_flops(model_flops, reason)
        if yardstick.dot_flops == 0:
            return _unverifiable_flops(model_flops, "the native implementation has no dots")
        return _flops_verdict(model_flops, yardstick.dot_flops, factor, "the native's dot FLOPs")
    if yardstick is not None and yardstick.flops_without_conversions:
        if yardstick.loops:
            return _unverifiable_flops(model_flops, _LOOPS)
        what = "XLA's count for the native code without conversions"
        return _flops_verdict(model_flops, yardstick.flops_without_conversions, factor, what)
    cost = native.cost
    if cost is None or not cost.flops:
        reason = "XLA reported no FLOPs for the native implementation"
        return _unverifiable_flops(model_flops, reason)
    if cost.has_loops:
        return _unverifiable_flops(model_flops, _LOOPS, cost.flops)
    return _flops_verdict(model_flops, cost.flops, factor, "XLA's count for the native code")


def bytes_model_check(
    model_bytes: int, native: CompiledStats, factor: float, yardstick: Yardstick | None = None
) -> BytesModelCheck:
    """The kernel's bytes model (ideal traffic) against XLA's bytes-accessed for the native.

    XLA's figure sums every compiled op's operands and results: the ideal only where the
    native compiled to one pass. So a model above it (more traffic than the native moves)
    is a mismatch anywhere, one far below it only against a one-pass native; against
    several passes (intermediates, a CPU's bf16 upcasts) the check is unverifiable.
    """
    cost = native.cost
    xla = cost.bytes_accessed if cost else None
    ratio = model_bytes / xla if xla else None
    passes = yardstick.passes if yardstick is not None else None
    if ratio is None:
        status, reason = "unverifiable", "XLA reported no bytes for the native code"
    elif cost is not None and cost.has_loops:
        status, reason = "unverifiable", _LOOPS
    elif ratio > factor or (ratio < 1 / factor and (passes is None or passes <= 1)):
        status = "mismatch"
        reason = f"bytes model is {ratio:.3g}× XLA's bytes accessed for the native code"
    elif ratio < 1 / factor:
        status = "unverifiable"
        reason = (
            f"bytes model is {ratio:.3g}× XLA's bytes accessed, which sums the native's "
            f"{passes} compiled passes (intermediates, conversions), not one pass's traffic"
        )
    else:
        status, reason = "ok", f"bytes model within {factor:g}× of XLA's bytes accessed"
    return BytesModelCheck(
        model_bytes=model_bytes, xla_bytes=xla, ratio=ratio, status=status, reason=reason
    )
