"""What XLA says about a compiled workload: compile time, memory and cost analyses, and
the cost models checked against XLA's count for the baseline implementation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax

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
