"""TPU chips for the cost model and the roofline: jax's own hardware table, plus what it lacks.

jax ships the per-generation table (``jax.experimental.pallas.tpu.get_tpu_info_for_chip``:
VMEM and SMEM capacity, HBM bandwidth, bf16/int8 peaks), and every figure it has is read
from it here, never copied. Its figures are **per TensorCore**. The rule for chips with two
TensorCores, used by the roofline (MFU, HBM %) and the model alike:

- a *megacore* chip (v4, v5p) is one jax device made of two TensorCores that share HBM: its
  chip peak is twice the per-TensorCore figure, and a Pallas grid's outermost ``parallel``
  dimension is split into two contiguous halves, one per TensorCore (jax's Pallas TPU
  pipelining guide, "TPUs in Megacore configuration"); a grid without a ``parallel``
  dimension runs on one TensorCore, at one TensorCore's peak and bandwidth share;
- every other chip (v5e, v6e, and 7x, whose two TensorCores are separate jax devices) is one
  TensorCore per device.

What jax's table lacks is kept here, with sources:

- the default *scoped* VMEM limit (XLA's ``--xla_tpu_scoped_vmem_limit_kib``), the budget a
  kernel's blocks and scratch must fit unless its ``CompilerParams.vmem_limit_bytes`` raises
  it. *Solid* (an exceeded limit is an error): v5e 16 MiB, libtpu's own error "Scoped
  allocation with size 31.07M and limit 16.00M exceeded scoped vmem limit" on a v5litepod
  (pytorch/xla#6611); v6e 32 MiB, "... limit 32.00M exceeded scoped vmem limit" on tpu6e
  (vllm-project/tpu-inference#3407). *Soft* (past it is a warning; only the physical VMEM
  is an error): 7x 32 MiB (the same vllm thread shows the message on tpu7x, but 21 configs
  of production kernels at 32.5-35.5 MiB compiled and ran on a 7x without
  ``vmem_limit_bytes``, measured by others: ci-bench issue 29); v4, v5p (assumed to share
  v5e's 16 MiB, no source), v4i (16 MiB, its whole VMEM), 7 and 8i (assumed 32 MiB like
  7x, no source).
- the fixed cost of one grid step, ~0.35 µs: the matmul guide's own v5e figures imply it
  (bm = bk = bn = 128 at 8192³: 91.8 ms over 64³ = 262,144 steps = 0.350 µs per step,
  where the MXU needs 5.6 ms and HBM 21 ms); docs/MODEL.md shows how the rest of the guide's
  measurements then come out.
- the vector unit's throughput (docs/MODEL.md, "Time"). One VALU operation works one vreg
  of 8 sublanes x 128 lanes (jax's table: ``num_sublanes``, ``num_lanes``); a TensorCore
  issues ``VALU_SLOTS`` of them per cycle: v5 (v5e, v5p) 4, "each (lane, sublane) pair on
  v5 contains 4 standard floating-point ALUs", and v4 2, "on v4 contains 2" (jax-ml's
  scaling book, "How to Think About TPUs", Appendix A, and its February 2025 edition); v4i
  is assumed like v4 (same generation); v6e, 7, 7x, 8i: 4, an estimate, no public source.
  The clock (``Chip.clock_hz``): for v4, v4i, v5e, v5p the bf16 peak of jax's table over its
  ``num_mxus`` x ``mxu_column_size`` squared x 2 FLOPs per cycle, which gives the published
  clocks (the scaling book: "5e13 bf16 FLOPs/s per MXU at 1.5GHz on TPU v5e", "a clock
  speed of about 1.75GHz" on v5p); for v6e and later the same quotient gives 3.5-4.4 GHz,
  not a clock, and no clock is published: 1.75 GHz, v5p's, an estimate, no public source.
  The EUP takes one vreg push per cycle: an estimate, no public source. A 16-bit VPU
  (bf16 packed (16, 128) per vreg) from generation 6 (``BF16_VPU_GENERATION``): Mosaic's
  ``bf16_ops_min_supported_versions`` (canonicalize_mosaic.cc) keeps bf16 add, mul, max,
  exp... in bf16 from generation 6 and widens them to float32 below it.
- the MXU rate a dense matmul *achieves* (``Chip.mxu_flops_per_s``), where a public
  measurement gives it, used for the model's MXU time (the roofline's MFU keeps the
  datasheet peak): 7x 956.4 TFLOP/s per device, 82.8 % of jax's 1,155, the asymptote of
  Google's own bf16 GEMM sweep on Ironwood (github AI-Hypercomputer/accelerator-microbenchmarks,
  Ironwood/Ironwood_Microbenchmarks_readme.md, "GEMM Results": m = n = k = 32768, 100 runs;
  950.1 at 16384). The same fraction is assumed for int8 (no measurement). Every other chip
  keeps its datasheet peak: no device-timed dense matmul was found for it (jax's matmul
  guide's XLA matmul on v5e, 181.8 TFLOP/s = 92.3 % at 8192^3, includes Python dispatch in
  its timing and is a lower bound, consistent with the peak; not applied).
- the HBM bandwidth a streaming kernel *achieves* (``Chip.model_hbm_bytes_per_s``), where
  a chip measurement gives it, used for the model's HBM time (the roofline's HBM % keeps
  jax's figure): v5e 656.6 GB/s, 80 % of jax's 820, a Pallas copy of 1 GiB through VMEM
  on a TPU v5e (``benchmarks/tpu_microbench.py hbm``, read + write, device time;
  benchmarks/data/tpu_v5e_microbench_2026-12-06.json). Model revision 6; checked, not
  fitted, against 54 points of seven kernel families measured on the same chip
  (``benchmarks/model_calibration_v5e.py``: the typical error 23 % -> 17 %).
- what a manual copy costs beyond its bytes (model revision 7), measured on a TPU v5e
  (``benchmarks/tpu_microbench_dma.py``; benchmarks/data/tpu_v5e_microbench_dma_2026-12-06.json):
  a loop whose iterations each wait on p copies of 8 KiB started one iteration ahead runs
  0.178 µs an iteration at p = 1 and 9.4 ns more per copy (least squares over p = 1-32):
  ``DMA_WAIT_US`` per copy waited (the scalar core's issue and wait, in the step's serial
  time) and ``DMA_ROUND_TRIP_US`` per iteration that waits, the copy's round trip, which
  hides behind the iteration's work (the same loop with 256 dependent multiply-adds after
  its wait runs 0.693 µs an iteration against 0.687 without the copy). Assumed for every
  chip: no other chip was measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from ci_bench.errors import InputError
from ci_bench.measure.model.aschip import MEGACORE as MEGACORE
from ci_bench.measure.model.aschip import tensor_cores
from ci_bench.schema.chips import CHIP_NAMES as TPU_CHIPS

MIB = 1024 * 1024
STEP_OVERHEAD_US = 0.35
# XLA's default --xla_tpu_scoped_vmem_limit_kib per generation (sources in the docstring).
DEFAULT_SCOPED_VMEM = {"v4": 16 * MIB, "v5e": 16 * MIB, "v5p": 16 * MIB, "v6e": 32 * MIB}
DEFAULT_SCOPED_VMEM |= {"7x": 32 * MIB, "v4i": 16 * MIB, "7": 32 * MIB, "8i": 32 * MIB}
# VALU operations (one vreg each) a TensorCore issues per cycle (sources in the docstring;
# v6e and later an estimate, no public source).
VALU_SLOTS = {"v4i": 2, "v4": 2, "v5e": 4, "v5p": 4, "v6e": 4, "7": 4, "7x": 4, "8i": 4}
# Chips whose clock follows from jax's MXU peak; later ones: ESTIMATED_CLOCK_HZ.
CLOCK_FROM_MXU = ("v4i", "v4", "v5e", "v5p")
ESTIMATED_CLOCK_HZ = 1.75e9  # v5p's published clock, assumed for v6e and later: no source
# A dense bf16 matmul's measured FLOP/s per device, where published (the docstring's source).
MXU_ACHIEVED_FLOPS_PER_S = {"7x": 956.3824592e12}
# A streaming copy's measured HBM bytes/s per device (the docstring's source).
HBM_ACHIEVED_BYTES_PER_S = {"v5e": 656.5889000622809e9}
# A manual copy's costs beyond its bytes (the docstring's source): per copy waited, and the
# round trip an iteration that waits on copies takes at least.
DMA_WAIT_US = 0.0094
DMA_ROUND_TRIP_US = 0.1615
BF16_VPU_GENERATION = 6  # Mosaic keeps bf16 elementwise ops in bf16 from this generation
# Chips whose default rests on libtpu's own error message (past it: an error, not a warning).
SOLID_SCOPED_VMEM = ("v5e", "v6e")
# Chips the model knows (jax's table but v2/v3, which Pallas TPU does not target), in
# generation order: the default targets on a CPU or GPU (the one list: schema/chips.py).
CHIP_NAMES = TPU_CHIPS


@dataclass(frozen=True)
class Chip:
    """One logical TPU device: per-TensorCore figures from jax, and the core count."""

    name: str
    tensor_cores: int  # TensorCores in one jax device (2 on megacore chips)
    vmem_capacity_bytes: int  # per TensorCore
    smem_capacity_bytes: int  # per TensorCore
    scoped_vmem_bytes: int  # the default limit a kernel's VMEM must fit
    hbm_bytes_per_s: float  # per TensorCore (the chip's bandwidth / cores)
    bf16_flops_per_s: float  # per TensorCore
    int8_ops_per_s: float  # per TensorCore (0: not published)
    step_overhead_us: float = STEP_OVERHEAD_US
    scoped_vmem_solid: bool = True  # False: past the default is a warning (no solid source)
    clock_hz: float = ESTIMATED_CLOCK_HZ  # the TensorCore's clock (docstring: sources)
    valu_slots: int = 4  # vreg VALU operations issued per cycle
    bf16_vpu: bool = False  # 16-bit elementwise work packed (16, 128) per vreg
    mxu_fraction: float = 1.0  # the measured share of the MXU peak a dense matmul reaches
    mxu_column_size: int = 128  # the systolic array's width (jax's table): dots pad to it
    hbm_fraction: float = 1.0  # the measured share of jax's HBM bandwidth a stream reaches
    dma_wait_us: float = DMA_WAIT_US  # the scalar core's cost of one copy waited on
    dma_round_trip_us: float = DMA_ROUND_TRIP_US  # a waiting iteration's floor, hidden by work

    @property
    def mxu_flops_per_s(self) -> float:
        """bf16 MXU FLOP/s the model charges: the peak times the measured fraction."""
        return self.bf16_flops_per_s * self.mxu_fraction

    @property
    def model_hbm_bytes_per_s(self) -> float:
        """HBM bytes/s the model charges: jax's figure times the measured fraction."""
        return self.hbm_bytes_per_s * self.hbm_fraction

    @property
    def mxu_int8_ops_per_s(self) -> float:
        """int8 MXU ops/s the model charges (the bf16 rate where no int8 peak is known)."""
        return (self.int8_ops_per_s or self.bf16_flops_per_s) * self.mxu_fraction

    @property
    def vpu_ops_per_s(self) -> float:
        """VALU vreg operations per second (per TensorCore)."""
        return self.valu_slots * self.clock_hz

    @property
    def eup_ops_per_s(self) -> float:
        """EUP vreg pushes per second (per TensorCore): one per cycle, an estimate."""
        return self.clock_hz

    @property
    def chip_tflops(self) -> float:
        return self.bf16_flops_per_s * self.tensor_cores / 1e12

    @property
    def chip_gbps(self) -> float:
        return self.hbm_bytes_per_s * self.tensor_cores / 1e9


class UnknownChipError(ValueError):
    """A chip name the table does not have."""


@cache
def chip(name: str) -> Chip:
    """The chip ``name`` (jax's names: v4i, v4, v5e, v5p, v6e, 7, 7x, 8i), from jax's table."""
    if name not in CHIP_NAMES:
        raise UnknownChipError(f"unknown TPU chip {name!r}; known: {', '.join(CHIP_NAMES)}")
    from jax.experimental.pallas import tpu as pltpu

    cores = tensor_cores(name)
    info = pltpu.get_tpu_info_for_chip(pltpu.ChipVersion(name), cores)
    per_cycle = info.num_mxus * info.mxu_column_size**2 * 2
    clock = info.bf16_ops_per_second / per_cycle if name in CLOCK_FROM_MXU else None
    achieved = MXU_ACHIEVED_FLOPS_PER_S.get(name)
    bw = float(info.mem_bw_bytes_per_second)
    return Chip(
        name=name,
        tensor_cores=cores,
        vmem_capacity_bytes=int(info.vmem_capacity_bytes),
        smem_capacity_bytes=int(info.smem_capacity_bytes),
        scoped_vmem_bytes=DEFAULT_SCOPED_VMEM[name],
        scoped_vmem_solid=name in SOLID_SCOPED_VMEM,
        hbm_bytes_per_s=bw,
        bf16_flops_per_s=float(info.bf16_ops_per_second),
        int8_ops_per_s=float(info.int8_ops_per_second),
        clock_hz=float(clock or ESTIMATED_CLOCK_HZ),
        valu_slots=VALU_SLOTS[name],
        bf16_vpu=info.generation >= BF16_VPU_GENERATION,
        mxu_fraction=achieved / info.bf16_ops_per_second if achieved else 1.0,
        mxu_column_size=int(info.mxu_column_size),
        hbm_fraction=HBM_ACHIEVED_BYTES_PER_S.get(name, bw) / bw,
    )


def chip_for_device_kind(device_kind: str) -> str | None:
    """jax's chip name for a ``device_kind`` ("TPU v5 lite" -> "v5e"); None if not a TPU
    this table knows."""
    from jax._src.pallas.mosaic.tpu_info import chip_version_from_device_kind

    version = chip_version_from_device_kind(device_kind.strip())
    name = str(version) if version is not None else None
    return name if name in CHIP_NAMES else None


def resolve_chips(given: Sequence[str], configured: Sequence[str]) -> list[str]:
    """--chip, else config target-chips, else this machine's TPU, else every chip."""
    unknown = [c for c in given if c not in CHIP_NAMES]
    if unknown:
        raise InputError(
            f"--chip: unknown TPU chip(s) {', '.join(unknown)}; known: {', '.join(CHIP_NAMES)}"
        )
    if given or configured:
        return list(dict.fromkeys([*given] or [*configured]))
    import jax

    if jax.default_backend() == "tpu":
        here = chip_for_device_kind(jax.devices()[0].device_kind)
        if here:
            return [here]
    return list(CHIP_NAMES)
