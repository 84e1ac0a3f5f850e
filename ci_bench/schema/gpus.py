"""The NVIDIA GPUs ci-bench knows, by name, with the figures the lowering check and the cost
model need: pure data (no jax), one entry per GPU, every figure from a cited public source.

jax exposes no GPU peaks and, on a host with no GPU, no GPU at all, so this table is the
GPU side of what ``jax.experimental.pallas.tpu.get_tpu_info_for_chip`` is for TPUs. Tensor
peaks are *dense* (NVIDIA's datasheets quote them "with sparsity": halved here). Sources:

- H100 (SXM5): NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100,
  "H100 SXM" column): FP32 67 TFLOPS, TF32 989, BF16/FP16 1,979, FP8/INT8 3,958 (sparse),
  HBM3 3.35 TB/s; the dense figures and 132 SMs: NVIDIA H100 Tensor Core GPU Architecture
  whitepaper (H100 SXM5: FP32 66.9, TF32 494.7, BF16 989.4, FP8 1,978.9 TFLOPS; jax's
  ``pallas/ops/gpu/collective_matmul_mgpu.py`` also says 132 SMs).
- H200 (SXM): NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200,
  "H200 SXM" column): the H100 SXM's compute figures (TF32 989, BF16 1,979, FP8 3,958
  TFLOPS sparse), HBM3e 4.8 TB/s; the same GH100 die, 132 SMs.
- B200 (HGX, 1,000 W): NVIDIA HGX B200 datasheet, per GPU (transcribed at
  glennklockwood.com/garden/processors/B200): FP32 80 TFLOPS, TF32 1,100, BF16/FP16 2,250,
  FP8/INT8 4,500 (dense), HBM3e 8 TB/s; 148 SMs (as the CUDA runtime reports it on B200s,
  e.g. the ParallelKittens paper's "the B200's 148 SMs").
- Shared memory, compute capabilities 9.0 and 10.0: CUDA C++ Programming Guide, "Technical
  Specifications per Compute Capability": 227 KB per thread block (opt-in), 228 KB per SM,
  at most 32 resident blocks and 64 resident warps per SM. jax's Mosaic GPU lowering uses
  the same 227 KB when no GPU is present (``mosaic/gpu/core.py``), so its shared-memory
  check on a CPU is exact for every GPU here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

GpuName = Literal["h100", "h200", "b200"]
GPU_NAMES: tuple[str, ...] = get_args(GpuName)
KIB = 1024
TERA = 1e12


@dataclass(frozen=True)
class Gpu:
    """One NVIDIA GPU as the lowering check and the cost model see it."""

    name: str
    device_kind: str  # jax's ``device_kind`` prefix ("NVIDIA H100 80GB HBM3" starts so)
    compute_capability: str  # "9.0": what jax's GPU lowerings ask the device for
    sms: int
    smem_per_block_bytes: int  # the opt-in maximum one program (thread block) may use
    smem_per_sm_bytes: int
    max_blocks_per_sm: int
    max_warps_per_sm: int
    hbm_bytes_per_s: float
    # Dense tensor-core peaks by operand kind (FLOP/s), and the CUDA cores' FP32 peak.
    bf16_flops_per_s: float
    tf32_flops_per_s: float
    fp8_flops_per_s: float
    int8_ops_per_s: float
    fp32_flops_per_s: float
    source: str

    @property
    def chip_tflops(self) -> float:
        return self.bf16_flops_per_s / TERA

    @property
    def chip_gbps(self) -> float:
        return self.hbm_bytes_per_s / 1e9


_SMEM = {"smem_per_block_bytes": 227 * KIB, "smem_per_sm_bytes": 228 * KIB}
_LIMITS = {"max_blocks_per_sm": 32, "max_warps_per_sm": 64}
# The whitepaper's dense figures for the H100 SXM5 (the datasheet's sparse ones, halved).
_HOPPER = {
    "compute_capability": "9.0",
    "sms": 132,
    "bf16_flops_per_s": 989.4 * TERA,
    "tf32_flops_per_s": 494.7 * TERA,
    "fp8_flops_per_s": 1978.9 * TERA,
    "int8_ops_per_s": 1978.9 * TERA,
    "fp32_flops_per_s": 66.9 * TERA,
}
GPUS: dict[str, Gpu] = {
    "h100": Gpu(
        name="h100",
        device_kind="NVIDIA H100",
        hbm_bytes_per_s=3.35e12,
        source="NVIDIA H100 datasheet (H100 SXM); H100 architecture whitepaper (132 SMs)",
        **_HOPPER,
        **_SMEM,
        **_LIMITS,
    ),
    "h200": Gpu(
        name="h200",
        device_kind="NVIDIA H200",
        hbm_bytes_per_s=4.8e12,
        source="NVIDIA H200 datasheet (H200 SXM)",
        **_HOPPER,
        **_SMEM,
        **_LIMITS,
    ),
    "b200": Gpu(
        name="b200",
        device_kind="NVIDIA B200",
        compute_capability="10.0",
        sms=148,
        hbm_bytes_per_s=8e12,
        bf16_flops_per_s=2250 * TERA,
        tf32_flops_per_s=1100 * TERA,
        fp8_flops_per_s=4500 * TERA,
        int8_ops_per_s=4500 * TERA,
        fp32_flops_per_s=80 * TERA,
        source="NVIDIA HGX B200 datasheet, per GPU at 1,000 W (dense)",
        **_SMEM,
        **_LIMITS,
    ),
}


def gpu(name: str) -> Gpu:
    """The GPU ``name``; a ValueError naming the known ones otherwise."""
    if name not in GPUS:
        raise ValueError(f"unknown GPU {name!r}; known: {', '.join(GPU_NAMES)}")
    return GPUS[name]


def gpu_for_device_kind(device_kind: str) -> str | None:
    """The table's name for jax's ``device_kind`` ("NVIDIA H200" -> "h200"); None if the
    GPU is not in the table (an H100 PCIe, whose figures differ, is not an H100 SXM)."""
    kind = device_kind.strip()
    if "PCIe" in kind or "NVL" in kind:
        return None
    return next((g.name for g in GPUS.values() if kind.startswith(g.device_kind)), None)
