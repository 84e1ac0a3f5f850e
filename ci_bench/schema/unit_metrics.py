"""The specification's section 3.3 metrics of one Pallas kernel on a TPU (``ci-bench
profile``; results version 7 keeps them per case, ``CaseResult.unit_metrics``).

Their source, by field: ``utilisation``, ``spills`` and ``fills`` from the trace's counters
(libtpu's per-region compiler occupancy laid over the measured windows: estimates, not
hardware counters); ``bundles``, ``register_pressure`` and ``dma`` from libtpu's LLO dump of
the kernel (static: the code, not a count per call). A figure the sources did not give is
absent, never zero. docs/USING.md, "Profiling metrics", says how each is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from ci_bench.schema.base import Model

# The units the counters name, in the order the tables show them (the specification's
# four first).
UNITS = (
    "MXU",
    "Scalar ALU",
    "Vector Store",
    "Vector Load",
    "Vector ALU",
    "Vector EUP",
    "XLU",
)


class KernelUnitMetrics(Model):
    """One ``tpu_custom_call`` (one Pallas kernel), over every call the trace holds."""

    kernel: str = Field(description="the custom call's HLO name, e.g. matmul_tiled.1")
    calls: int = Field(ge=0)
    device_us: float = Field(ge=0, description="device time per call, microseconds")
    covered: float = Field(ge=0, le=1, description="share of the kernel's time the counters cover")
    utilisation: dict[str, float] = Field(
        default_factory=dict,
        description="unit -> % of its issue slots busy, weighted by each region's time",
    )
    spills: int | None = Field(default=None, ge=0, description="vector spill stores in the code")
    fills: int | None = Field(default=None, ge=0, description="vector fill loads in the code")
    bundles: int | None = Field(default=None, ge=0, description="scheduled bundles in the code")
    register_pressure: int | None = Field(
        default=None, ge=0, description="vector registers live at the peak (the dump's figure)"
    )
    dma: dict[str, int] = Field(
        default_factory=dict,
        description="DMA instructions in the code by kind: hbm_to_vmem, vmem_to_hbm, done.wait",
    )


@dataclass(frozen=True)
class OutsideKernels:
    """The XLA operations that ran beside the Pallas kernels in a traced program, per call
    of it: the copies XLA's layout assignment puts around a custom call (an operand stored
    batch-minor, ``{2,0,1:T(4,128)}``, handed to a kernel that takes it row-major), the
    fusions of the jnp code around it. The kernels' own table never shows them."""

    calls: int  # the program's traced calls (the most calls of one Pallas kernel)
    program_us: float  # the whole program's device time per call (XLA Modules)
    ops: dict[str, tuple[float, float]]  # kind (copy, fusion, ...) -> (ops, µs) per call

    @property
    def us(self) -> float:
        return sum(us for _, us in self.ops.values())
