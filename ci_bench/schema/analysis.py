"""``ci-bench analyze`` output: every selected case's cost model, versioned (docs/FORMATS.md).

Each case is a ``CaseModel`` (the contract's ``id``, ``hbm_bytes``, ``ideal_bytes``,
``vmem_bytes``, ``grid_steps``, ``flops``, ``chips``, ``calls``) with its identity and, with
``--base``, the model's verdict against the base ref's kernel.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from ci_bench.schema.base import Model
from ci_bench.schema.gpu_model import GpuDetail
from ci_bench.schema.model import Bound, CallModel, CaseModel, ChipModel
from ci_bench.schema.report import ModelChange, RunState

ANALYSIS_SCHEMA_VERSION = 4
# 2: a case may be ``partial`` (parts not modelled: no modelled time, never judged) and the
# verdict ``partial``; chips v4i, 7, 8i; ``vmem_warning`` per chip. 3: ``--base`` records
# the run states of the comparison (``same-code``: both sides traced a kernel from one file)
# and the verdict ``same_code``. 4: a ``partial`` case carries no time: every per-chip time
# (``modelled_us``, ``compute_us``, ``memory_us``, ``overhead_us``, ``mfu_ceiling``,
# ``bound``, a GPU's ``vector_us``) is null, in the case and in its calls; older files read
# the same (their partial times are dropped on reading). Versions 1 to 3 are still read.
ANALYSIS_READABLE = (1, 2, 3, 4)
# The per-chip fields that are times (or follow from them): withheld for a partial case.
TIME_FIELDS = ("modelled_us", "compute_us", "memory_us", "overhead_us", "mfu_ceiling", "bound")


class AnalyzedGpu(GpuDetail):
    """A GPU's wave model; ``vector_us`` is null for a partial case."""

    vector_us: float | None = Field(  # type: ignore[assignment]
        0.0, ge=0, description="non-matmul work at the CUDA cores' rate; null when partial"
    )


class AnalyzedChip(ChipModel):
    """A case (or call) on one chip; every time is null for a partial case (v4)."""

    modelled_us: float | None = Field(  # type: ignore[assignment]
        ge=0, description="null: the case is partial (no modelled time)"
    )
    compute_us: float | None = Field(ge=0)  # type: ignore[assignment]
    memory_us: float | None = Field(ge=0)  # type: ignore[assignment]
    overhead_us: float | None = Field(ge=0)  # type: ignore[assignment]
    bound: Bound | None  # type: ignore[assignment]
    gpu: AnalyzedGpu | None = None  # type: ignore[assignment]


class AnalyzedCall(CallModel):
    chips: dict[str, AnalyzedChip] = Field(default_factory=dict)  # type: ignore[assignment]


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


class AnalyzedCase(CaseModel):
    """One case of ``ci-bench analyze``: its model, and (``--base``) the model's verdict
    against the base ref's kernel."""

    id: str
    kernel: str
    version: str
    chips: dict[str, AnalyzedChip] = Field(default_factory=dict)  # type: ignore[assignment]
    calls: list[AnalyzedCall] = Field(default_factory=list)  # type: ignore[assignment]
    errors: list[str] = Field(
        default_factory=list, description="target chips whose VMEM the case does not fit"
    )
    against: ModelChange | None = Field(
        None, description="--base: the model's verdict against the base ref's kernel"
    )

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
    def _whole_has_time(self) -> AnalyzedCase:
        if self.status == "ok" and any(c.modelled_us is None for c in self.chips.values()):
            raise ValueError("a wholly modelled case has its modelled time on every chip")
        return self


class AnalysisMeta(Model):
    tool_version: str
    jax: str
    profile: str | None
    chips: list[str] = Field(description="the target chips")
    seed: int
    base_ref: str | None = None
    seconds: float | None = Field(None, ge=0, description="wall time of the whole analysis")


class Analysis(Model):
    """``ci-bench analyze --format json`` / ``--output``: a small versioned document."""

    schema_version: Literal[1, 2, 3, 4] = ANALYSIS_SCHEMA_VERSION
    kind: Literal["analysis"] = "analysis"
    verdict: Literal[
        "pass", "structural", "improved", "error", "not_modelled", "partial", "same_code"
    ]
    exit_code: int
    meta: AnalysisMeta
    cases: list[AnalyzedCase]
    run_states: list[RunState] = Field(
        default_factory=list,
        description="--base: facts about the comparison (same-code: nothing compared), v3",
    )
