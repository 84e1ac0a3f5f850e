"""What a results file's case holds beside its times: correctness, roofline metrics,
the compiled executable's memory and cost, the cost-model checks (part of the results
format, ``ci_bench.schema.results``; split out to keep each module readable)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ci_bench.schema.base import Model

Bound = Literal["compute", "memory"]
CostSource = Literal["declared", "derived"]


class Correctness(Model):
    """Pallas output vs the kernel's reference, elementwise in float32."""

    ok: bool
    max_abs_err: float | None
    max_rel_err: float | None
    atol: float
    rtol: float
    mismatched: int = Field(ge=0, description="elements outside atol + rtol*|ref|")
    elements: int = Field(ge=0)
    nan: int = Field(0, ge=0, description="NaN elements in the Pallas output")
    inf: int = Field(0, ge=0, description="±Inf elements in the Pallas output")
    reference_nonfinite: int = Field(0, ge=0, description="NaN/Inf elements in the reference")
    atol_scale: float | None = Field(
        None,
        description="gradient checks: atol is the SPEC's times this RMS of the reference "
        "gradient (null for outputs)",
    )


class Metrics(Model):
    """Roofline metrics of the Pallas kernel; peak-relative ones are null when unknown."""

    flops: int = Field(ge=0)
    bytes_accessed: int = Field(ge=0)
    arithmetic_intensity: float | None
    achieved_gbps: float
    mfu: float | None
    hbm_utilization: float | None
    bound: Bound | None
    peak_tflops: float | None
    peak_gbps: float | None
    compute_unit: Literal["matrix", "vector"] | None = Field(
        None, description="the SPEC's compute unit: MFU is against the matrix peak only"
    )
    flops_source: CostSource = Field(
        "declared",
        description="'declared' by the SPEC, or 'derived' by ci-bench (backward: 2x forward)",
    )
    bytes_source: CostSource = Field(
        "declared",
        description="'declared' by the SPEC, or 'derived' (backward: forward + gradients)",
    )

    @property
    def headline(self) -> Literal["mfu", "hbm"]:
        """Which utilisation matters: HBM % for memory-bound (or vector-unit) kernels."""
        if self.bound == "memory" or (self.bound is None and self.compute_unit == "vector"):
            return "hbm"
        return "mfu"


class CompileTimes(Model):
    """First call (trace + compile + one run) per implementation, never in the samples."""

    pallas_ms: float | None = None
    native_ms: float | None = None


class MemoryStats(Model):
    """The compiled executable's memory analysis (XLA buffer assignment), in bytes."""

    argument_bytes: int = Field(ge=0)
    output_bytes: int = Field(ge=0)
    temp_bytes: int = Field(ge=0)
    alias_bytes: int = Field(ge=0)
    generated_code_bytes: int = Field(ge=0)
    peak_bytes: int = Field(ge=0, description="XLA's peak_memory_in_bytes")


class XlaCost(Model):
    """XLA's cost analysis of the compiled executable.

    XLA counts a loop body once, so for code with loops (every interpreted Pallas call,
    lax.scan) its figures undercount; ``has_loops`` says when that applies.
    """

    flops: float | None
    bytes_accessed: float | None
    has_loops: bool


class CompiledStats(Model):
    memory: MemoryStats | None = None
    cost: XlaCost | None = None


CostCheckStatus = Literal["ok", "mismatch", "unverifiable"]


class CostModelCheck(Model):
    """The kernel's hand-written FLOPs against XLA's count for the native implementation.

    A wrong model makes TFLOPS and MFU lie; the native implementation is the yardstick
    because XLA counts its FLOPs exactly when it has no loops.
    """

    model_flops: int
    xla_flops: float | None
    ratio: float | None = Field(description="model / XLA")
    status: CostCheckStatus
    reason: str


class DispatchOverhead(Model):
    """Where a timer saw both clocks (the profiler timer): per-call medians of the host's
    wall time, the trace's device time, and their difference (Python dispatch, transfers)."""

    wall_median_ms: float
    device_median_ms: float
    overhead_median_ms: float


class BytesModelCheck(Model):
    """The kernel's bytes model against XLA's bytes-accessed figure for the native
    implementation: a warning only, since XLA's figure depends on how it fused the ops."""

    model_bytes: int
    xla_bytes: float | None
    ratio: float | None = Field(description="model / XLA")
    status: CostCheckStatus
    reason: str
