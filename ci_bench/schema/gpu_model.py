"""The GPU side of a chip's cost model (``ChipModel.gpu``): what the wave model read.

Part of the cost model's format (docs/FORMATS.md, "The cost model"): present on the entries
of GPUs (``h100``, ``h200``, ``b200``), absent (null) on TPU chips and in older files.
Method: docs/GPU.md, "The cost model".
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ci_bench.schema.base import Model


class GpuDetail(Model):
    """One case (or call) on one GPU: programs in waves over the SMs."""

    backend: Literal["triton", "mosaic_gpu"]
    sms: int = Field(ge=1, description="the GPU's streaming multiprocessors")
    programs: int = Field(ge=0, description="grid programs (thread blocks) of every call")
    waves: int = Field(ge=0, description="rounds of programs the SMs run at once")
    occupancy: int = Field(ge=1, description="programs one SM holds at once (the largest call)")
    smem_per_program_bytes: int = Field(
        ge=0,
        description="shared memory one program holds: exact for Mosaic GPU's blocks, "
        "Triton's: its costliest dot's operand tiles (num_stages copies of those it loads in a "
        "loop), a lower bound",
    )
    vector_us: float = Field(
        0.0, ge=0, description="non-matmul work at the CUDA cores' rate: not in modelled_us"
    )
