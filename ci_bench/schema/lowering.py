"""The lowering check's file (``ci-bench lower --output``): a small versioned format.

Lowering proves a kernel compiles for a platform this machine does not have (Pallas to
Mosaic for TPU, to Triton for CUDA) without timing anything, so it is its own document
rather than a results file with fake timings. Format history: docs/FORMATS.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ci_bench.schema.base import KernelName, Model, UtcDatetime, Version
from ci_bench.schema.withheld import WithheldModel

LOWERING_SCHEMA_VERSION = 6
# 2: each case carries the cost model (``model``); a case whose VMEM does not fit a target
# chip is an error. 3: a TPU case is lowered as each target chip (``chips``), and a failure
# that comes from the machine, not the kernel, is ``host_error`` (never a red check).
# 4: ``tiling``, the cost model's faster tilings of kernels that declare tunables (a hint
# for the comment, never a verdict). 5: a CUDA case is lowered as each target GPU
# (``chips`` holds GPU names), and a failure names the rule it broke (``rule``). 6: a tiling
# hint whose best is a tie says so (``tied``, ``tie_knobs``); a partial case's ``model``
# carries no time (``schema.withheld``). Versions 1 to 5 are still read.
LOWERING_READABLE = (1, 2, 3, 4, 5, 6)
LoweringPlatform = Literal["tpu", "cuda"]
LoweringStatus = Literal["ok", "error", "host_error"]
# The rule a failed lowering broke, named from jax's message (``measure.lowering_rules``).
LoweringRule = Literal["power_of_2", "shared_memory", "unsupported_primitive", "tpu_block_shape"]


class ChipLowering(Model):
    """One case lowered as one TPU chip (version 3) or GPU (version 5)."""

    status: LoweringStatus
    kind: str | None = None
    custom_calls: list[str] = Field(default_factory=list)
    error: str | None = None
    rule: LoweringRule | None = None
    lower_ms: float | None = Field(None, ge=0)


class LoweredCase(Model):
    """One case exported for ``platform``: the Pallas custom calls found, or jax's error."""

    id: str
    kernel: str
    version: str
    params: dict[str, int]
    dtype: str
    platform: LoweringPlatform
    status: LoweringStatus = Field(
        description="ok; error (the kernel: a red check); host_error (this machine, not the "
        "kernel: reported, never a red check)"
    )
    kind: str | None = Field(None, description="Pallas backend found: mosaic, triton, mosaic_gpu")
    custom_calls: list[str] = Field(default_factory=list, description="custom-call targets")
    error: str | None = None
    rule: LoweringRule | None = Field(
        None, description="the rule a failed lowering broke, when jax's message names one (5)"
    )
    traceback: str | None = Field(None, description="full traceback of a failure (logs only)")
    lower_ms: float | None = Field(None, ge=0, description="trace + lower + serialise time")
    model: WithheldModel | None = Field(
        None,
        description="the cost model on the target chips (version 2; a partial case's times "
        "null, version 6); null in version 1",
    )
    chips: dict[str, ChipLowering] = Field(
        default_factory=dict,
        description="the case lowered as each target TPU chip (version 3) or GPU (version 5)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> LoweredCase:
        if self.status == "ok" and (self.error or not self.kind):
            raise ValueError("an ok lowering names its kind and has no error")
        if self.status != "ok" and not self.error:
            raise ValueError("a failed lowering needs an error message")
        return self


class LoweringMeta(Model):
    tool_version: str
    started_at: UtcDatetime
    platform: LoweringPlatform
    profile: str | None
    jax: str
    jaxlib: str
    kernels: dict[KernelName, Version] = Field(description="kernel name -> version")
    chips: list[str] = Field(
        default_factory=list, description="target chips the model checked (version 2)"
    )


class TilingHint(Model):
    """One case on one chip: the cost model's best config of the kernel's tunables and the
    shipped default's, both modelled (version 4; the lower role's search, docs/TUNE.md)."""

    case: str
    chip: str
    config: dict[str, int | str | bool] = Field(description="the model's best config")
    modelled_us: float = Field(gt=0, allow_inf_nan=False)
    default: dict[str, int | str | bool] = Field(description="the config the kernel ships")
    default_us: float = Field(gt=0, allow_inf_nan=False)
    tied: list[dict[str, int | str | bool]] = Field(
        default_factory=list,
        description="every config of the best set when the model cannot tell them apart "
        "(``config`` is then only its first; version 6)",
    )
    tie_knobs: list[str] = Field(default_factory=list, description="knobs that differ in tied")


class LoweringResults(Model):
    """``ci-bench lower --output``: every selected case exported for one platform."""

    schema_version: Literal[1, 2, 3, 4, 5, 6] = LOWERING_SCHEMA_VERSION
    kind: Literal["lowering"] = "lowering"
    meta: LoweringMeta
    cases: list[LoweredCase]
    tiling: list[TilingHint] = Field(
        default_factory=list, description="the lower role's tiling search (version 4)"
    )
