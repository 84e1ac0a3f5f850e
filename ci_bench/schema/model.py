"""The cost model of a case, read from its traced Pallas grid (``ci-bench analyze``).

Part of the results format (``CaseResult.model``, results version 3) and of the
``analyze --format json`` output, whose field names are a contract: ``id``, ``hbm_bytes``,
``ideal_bytes``, ``vmem_bytes``, ``grid_steps``, ``flops``, ``chips`` (per chip
``vmem_limit_bytes``, ``fits``, ``modelled_us``) and ``calls``. Every figure is exact and
the same on every machine: it is computed from the traced program, never measured. What
the model cannot see is listed in ``not_modelled``, never reported as zero. Method and
limits: docs/MODEL.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ci_bench.schema.base import Model
from ci_bench.schema.gpu_model import GpuDetail

# jax device_kind -> jax's chip name, for the chips the model knows (the same mapping as
# jax's ``chip_version_from_device_kind``; tests/test_model_chips.py keeps them equal). Pure
# data, so the judge can pick the runner's chip without importing jax.
TPU_DEVICE_KINDS = {
    "TPU v4 lite": "v4i",
    "TPU v4": "v4",
    "TPU v5 lite": "v5e",
    "TPU v5e": "v5e",
    "TPU v5": "v5p",
    "TPU v5p": "v5p",
    "TPU v6 lite": "v6e",
    "TPU v6e": "v6e",
    "TPU7": "7",
    "TPU7x": "7x",
    "TPU8i": "8i",
}

MemorySpace = Literal["vmem", "smem", "any", "semaphore"]
Bound = Literal["compute", "vector", "memory", "overhead"]
FlopsCheck = Literal["ok", "mismatch", "unverifiable"]


class OperandModel(Model):
    """One array a ``pallas_call`` reads or writes, and what the pipeline moves of it."""

    role: Literal["input", "output"]
    index: int = Field(ge=0, description="position among the call's inputs or outputs")
    origin: str = Field(description="jax's name for it, e.g. args[0] or outputs")
    shape: list[int]
    dtype: str
    block_shape: list[int] | None = Field(
        None, description="the block (squeezed dims as 1); null when not pipelined (ANY)"
    )
    memory_space: MemorySpace
    buffers: int = Field(
        ge=0, description="pipeline buffers (2 unless pipeline_mode says; 1 for a fixed block)"
    )
    copies: int = Field(ge=0, description="HBM<->VMEM block copies over the whole grid")
    hbm_bytes: int = Field(ge=0, description="bytes those copies move")
    ideal_bytes: int = Field(ge=0, description="the array's own bytes: each element once")
    reread: float | None = Field(None, description="hbm_bytes / ideal_bytes")
    vmem_bytes: int = Field(ge=0, description="buffers x block bytes as laid out in VMEM")
    aliased_to: int | None = Field(None, description="input_output_aliases: the output index")


class ChipModel(Model):
    """The case (or one call) on one TPU chip."""

    vmem_limit_bytes: int = Field(
        description="the VMEM budget that applies: the kernel's vmem_limit_bytes, else the "
        "chip's default scoped limit"
    )
    vmem_limit_source: Literal["default", "kernel"]
    vmem_capacity_bytes: int = Field(description="physical VMEM of one TensorCore")
    vmem_bytes: int = Field(ge=0)
    smem_bytes: int = Field(0, ge=0)
    smem_capacity_bytes: int = 0
    fits: bool
    why_not: str | None = Field(None, description="chip, bytes and limit when it does not fit")
    vmem_warning: str | None = Field(
        None, description="past a default scoped limit that has no solid source (still fits)"
    )
    modelled_us: float = Field(ge=0)
    compute_us: float = Field(
        ge=0, description="MXU time: dot FLOPs / the MXU rate (the peak x mxu_fraction)"
    )
    mxu_fraction: float | None = Field(
        None,
        gt=0,
        le=1,
        description="the share of the MXU peak compute_us is charged at (a measured dense-"
        "matmul rate, docs/MODEL.md); None: the peak",
    )
    vector_us: float | None = Field(
        None, ge=0, description="VALU time: vreg operations / the chip's rate (issue 39)"
    )
    eup_us: float | None = Field(
        None, ge=0, description="EUP time: transcendental vreg pushes / the chip's rate"
    )
    memory_us: float = Field(ge=0, description="HBM time: modelled bytes / bandwidth")
    outside_us: float | None = Field(
        None,
        ge=0,
        description="the XLA operations around the kernels: outside_bytes / bandwidth, in "
        "modelled_us (a case's total only; None: a call, or written before revision 3)",
    )
    overhead_us: float = Field(ge=0, description="grid steps x the per-step overhead")
    bound: Bound
    mfu_ceiling: float | None = Field(None, description="flops / (modelled time x chip peak)")
    tensor_cores: int = Field(1, ge=1, description="TensorCores the grid spreads over")
    hbm_bytes: int = Field(0, ge=0, description="modelled bytes on this chip (megacore split)")
    grid_steps: int | None = Field(
        None,
        ge=0,
        description="grid steps of this chip's own trace (a kernel may trace differently per "
        "chip: a tuned chunk); None: written before they were kept per chip",
    )
    gpu: GpuDetail | None = Field(
        None, description="a GPU's wave model (its vmem_* fields are shared memory per block)"
    )


# How ``merge_chips`` says a case's top-level bytes, steps and calls are one chip's trace
# only: a model that says so has no structure valid for its other chips.
TRACES_DIFFERENTLY = "the kernel traces differently on "


class CallModel(Model):
    """One ``pallas_call`` (times ``count``, the static trip counts around it)."""

    name: str | None = None
    count: int = Field(1, ge=1, description="times it runs: enclosing scan/while trip counts")
    grid: list[int]
    grid_steps: int = Field(ge=0, description="steps of one run times count")
    dimension_semantics: list[str] | None = None
    hbm_bytes: int = Field(ge=0)
    ideal_bytes: int = Field(ge=0)
    vmem_bytes: int = Field(
        ge=0, description="pipeline buffers + VMEM scratch + the body's values Mosaic keeps"
    )
    scratch_bytes: int = Field(0, ge=0)
    smem_bytes: int = Field(0, ge=0, description="scalar prefetch + SMEM blocks and scratch")
    flops: int = Field(ge=0, description="MXU FLOPs: the body's dot_generals x steps")
    manual_dma_bytes: int = Field(0, ge=0, description="async copies in the body (ANY refs)")
    vmem_limit_bytes: int | None = Field(None, description="the kernel's own CompilerParams")
    reread_operand: str | None = Field(
        None, description="the operand moved most often relative to its size, when > 1x"
    )
    operands: list[OperandModel] = Field(default_factory=list)
    chips: dict[str, ChipModel] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


class GpuBound(Model):
    """The GPU (Triton) lowering's traffic: an upper bound, by construction."""

    hbm_bytes: int = Field(ge=0)
    grid_steps: int = Field(ge=0)
    label: str = (
        "upper bound: every program loads its blocks (no revisit elision across programs); "
        "L2 hits not modelled"
    )


# The cost model's revision, recorded in every case model it writes: a reference modelled by
# another revision (or before revisions were recorded: None) is not judged against the
# current one, since the figures moved with the model, not with the kernel. 1: issue 39
# (the vector term, lookahead pipelines, 7x's measured MXU rate). 2: dots charged at the
# MXU's width (k and n padded to 128 or 256), nested pl.when weighed over the steps that
# reach it. 3: the XLA operations around the kernels (their HBM bytes under perfect fusion),
# manual copies waited on with no work issued since their start added to their step.
# 4: a float32 x float32 dot at DEFAULT precision makes the case partial (its cost in
# Mosaic is not known; the one measured ran 1.39x the one-pass model).
# 5: float32 dots priced from chip microbenchmarks (float32 x float32 1.53 bf16 passes at
# DEFAULT, 4.31 at HIGHEST; float32 x bfloat16 1.22; TPU v5e), never partial for it; blocks
# and scratch at exactly their VMEM limit do not fit (as Mosaic refuses them).
# 6: v5e's HBM time at the bandwidth a streaming copy measured on the chip (656.6 GB/s,
# 80 % of jax's table), checked against 54 points of jax's and the project's kernels.
# 7: from chip microbenchmarks (TPU v5e): a block the same at every grid step takes one VMEM
# buffer, not two (628 matmul tilings compiled: 4 disagree with the fit, from 11); a manual
# copy waited on costs 9.4 ns of the scalar core and an iteration that waits takes at least
# a copy's round trip, 0.16 µs, unless its work hides it.
# 8: VMEM as the TPU compiler allocates it (libtpu compiling for a v5e, every tiling of the
# project's matmul and jax's flash attention): a dot accumulated into a ref stages its left
# operand as bfloat16, any other dot keeps its float32 result, an unrolled loop's values
# count per copy; a scratch the grid cannot carry from step to step is forwarded within
# the step (temporaries.py).
# 9: the chip's stored layouts (its client's default, asked on a TPU): a transpose that
# reads a function input's stored bytes row-major (or writes an output's) is a bitcast and
# moves nothing (matmul 0.9.0's swaps, compiled with no copy on a v5e; layouts.py).
# 10: the vector table is the compiler's (libtpu's v5e bundles for one operation,
# benchmarks/tpu_vector_ops.py): exp, log, rsqrt, sqrt, division and logistic finish on the
# VALU; reductions and broadcasts across lanes are the XLU's, not the VALU's; a narrowing
# cast packs (0.5 a float32 vreg); a 16-bit float op without a bf16 VPU unpacks and packs;
# a float dot sums its MXU passes over k on the VALU.
MODEL_REVISION = 10


class CaseModel(Model):
    """A case's model: per call and summed; per target chip. ``partial``: the figures leave
    out parts of the kernel (``not_modelled``) whose cost is unknown, so unbounded: they are
    lower bounds, and no table, comment or verdict shows or judges its modelled time."""

    status: Literal["ok", "partial", "not_modelled"]
    reason: str | None = Field(
        None, description="why not modelled, or why partial (status not_modelled, partial)"
    )
    hbm_bytes: int | None = None
    ideal_bytes: int | None = None
    outside_bytes: int | None = Field(
        None,
        ge=0,
        description="HBM bytes the XLA operations around the kernels move under perfect "
        "fusion (a lower bound); None: written before revision 3",
    )
    vmem_bytes: int | None = Field(None, description="the largest call's VMEM")
    grid_steps: int | None = None
    flops: int | None = Field(None, description="MXU FLOPs of every call")
    spec_flops: int | None = Field(None, description="the SPEC's FLOPs model for the case")
    flops_ratio: float | None = Field(None, description="flops / spec_flops")
    flops_check: FlopsCheck | None = None
    chips: dict[str, ChipModel] = Field(default_factory=dict)
    calls: list[CallModel] = Field(default_factory=list)
    gpu: GpuBound | None = None
    not_modelled: list[str] = Field(
        default_factory=list, description="parts of the kernel the figures leave out"
    )
    notes: list[str] = Field(default_factory=list)
    model_ms: float | None = Field(None, ge=0, description="time to trace and model")
    revision: int | None = Field(
        None, description="the cost model's revision (MODEL_REVISION); None: written before"
    )

    @model_validator(mode="after")
    def _consistent(self) -> CaseModel:
        if self.status != "ok" and not self.reason:
            raise ValueError("a case that is not (wholly) modelled says why")
        if self.status != "not_modelled" and self.hbm_bytes is None:
            raise ValueError("a modelled case has its figures")
        if self.status == "ok" and self.not_modelled:
            raise ValueError("a case with parts not modelled is partial, not ok")
        return self

    def too_big(self) -> dict[str, str]:
        """Chip -> why the case does not fit its VMEM there (empty: fits everywhere)."""
        return {name: c.why_not or "does not fit" for name, c in self.chips.items() if not c.fits}


def not_modelled(reason: str, model_ms: float | None = None) -> CaseModel:
    """A case the model cannot read: its reason, never zeros."""
    return CaseModel(status="not_modelled", reason=reason, model_ms=model_ms)
