"""The cost model as a file writes it: a ``partial`` case with no time (issue 39).

A partial case's times are lower bounds of unknown distance (docs/MODEL.md, "Partial
models"). ``WithheldModel`` is a ``CaseModel`` whose every per-chip time is null when the
case is partial, in the case and in its calls, whichever version wrote the data it reads:
the analysis file (version 4) and the lowering file's ``model`` (version 6) carry it.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from ci_bench.schema.base import Model
from ci_bench.schema.gpu_model import GpuDetail
from ci_bench.schema.model import Bound, CallModel, CaseModel, ChipModel

# The per-chip fields that are times (or follow from them): withheld for a partial case.
TIME_FIELDS = (
    "modelled_us",
    "compute_us",
    "vector_us",
    "eup_us",
    "memory_us",
    "outside_us",
    "overhead_us",
    "mfu_ceiling",
    "bound",
)


class WithheldGpu(GpuDetail):
    """A GPU's wave model; ``vector_us`` is null for a partial case."""

    vector_us: float | None = Field(  # type: ignore[assignment]
        0.0, ge=0, description="non-matmul work at the CUDA cores' rate; null when partial"
    )


class WithheldChip(ChipModel):
    """A case (or call) on one chip; every time is null for a partial case."""

    modelled_us: float | None = Field(  # type: ignore[assignment]
        ge=0, description="null: the case is partial (no modelled time)"
    )
    compute_us: float | None = Field(ge=0)  # type: ignore[assignment]
    memory_us: float | None = Field(ge=0)  # type: ignore[assignment]
    overhead_us: float | None = Field(ge=0)  # type: ignore[assignment]
    bound: Bound | None  # type: ignore[assignment]
    gpu: WithheldGpu | None = None  # type: ignore[assignment]


class WithheldCall(CallModel):
    chips: dict[str, WithheldChip] = Field(default_factory=dict)  # type: ignore[assignment]


def _without_times(chips: Any) -> Any:
    """``chips`` (a mapping of chip name -> its dict) with every time set to null."""
    if not isinstance(chips, dict):
        return chips
    out = {}
    for name, chip in chips.items():
        if isinstance(chip, Model):
            chip = chip.model_dump()
        if isinstance(chip, dict):
            chip = {**chip, **dict.fromkeys(TIME_FIELDS)}
            if isinstance(chip.get("gpu"), dict):
                chip["gpu"] = {**chip["gpu"], "vector_us": None}
        out[name] = chip
    return out


class WithheldModel(CaseModel):
    """A case's model with a partial case's times withheld (null)."""

    chips: dict[str, WithheldChip] = Field(default_factory=dict)  # type: ignore[assignment]
    calls: list[WithheldCall] = Field(default_factory=list)  # type: ignore[assignment]

    @model_validator(mode="before")
    @classmethod
    def _partial_has_no_time(cls, data: Any) -> Any:
        """A partial case's times are lower bounds of unknown distance (docs/MODEL.md,
        "Partial models"): withheld here, so no reader of the file can show one (issue 39),
        whichever version wrote it."""
        if not isinstance(data, dict) or data.get("status") != "partial":
            return data
        out = dict(data)
        if "chips" in out:
            out["chips"] = _without_times(out["chips"])
        if isinstance(out.get("calls"), list):
            out["calls"] = [
                {**c, "chips": _without_times(c.get("chips"))} if isinstance(c, dict) else c
                for c in (x.model_dump() if isinstance(x, Model) else x for x in out["calls"])
            ]
        return out

    @model_validator(mode="after")
    def _whole_has_time(self) -> WithheldModel:
        if self.status == "ok" and any(c.modelled_us is None for c in self.chips.values()):
            raise ValueError("a wholly modelled case has its modelled time on every chip")
        return self
