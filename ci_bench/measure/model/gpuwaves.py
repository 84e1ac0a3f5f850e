"""How a call's programs fill an NVIDIA GPU (pure): CUDA's launch order, the shared memory
and warps one program holds, how many fit on an SM at once (the occupancy), the HBM bytes of
each wave of programs, and the least work the busiest SM can have (``gpu`` times them)."""

from __future__ import annotations

import math

import numpy as np

from ci_bench.measure.model.calls import Call
from ci_bench.measure.model.gpubody import GpuWork
from ci_bench.measure.model.pipeline import block_bytes
from ci_bench.schema.gpus import Gpu


def launch_order(grid: tuple[int, ...]) -> np.ndarray:
    """The row-major step ids of the grid in CUDA's launch order: dimension 0 fastest."""
    steps = math.prod(grid)
    if not grid:
        return np.zeros(1, np.int64)
    coords = np.unravel_index(np.arange(steps), grid, order="F")
    return np.ravel_multi_index(coords, grid)


def smem_per_program(call: Call, work: GpuWork, backend: str) -> int:
    """Shared memory one program holds. Mosaic GPU copies every block to shared memory
    (plus its scratch); Triton keeps ``num_stages`` copies of a dot operand it loads in a
    loop (its software pipeline) and one of a computed one (the MMA reads operands from
    shared memory): for the costliest dot, a lower bound (Triton decides when XLA
    compiles)."""
    if backend == "mosaic_gpu":
        blocks = [op for op in call.operands if op.block is not None]
        return sum(math.prod(op.kernel_block) * op.itemsize for op in blocks) + (
            call.scratch_vmem_bytes
        )
    stages = int(getattr(call.compiler_params, "num_stages", None) or 3)
    per_dot: dict[int, int] = {}
    for dot, _, n, staged in work.dot_tiles:
        per_dot[dot] = per_dot.get(dot, 0) + n * (stages if staged else 1)
    # The costliest dot alone: a lower bound (Triton reuses buffers whose lives do not
    # overlap, which the body does not say), so a figure past the limit is a real concern.
    return max(per_dot.values(), default=0)


def warps_of(call: Call, backend: str) -> int:
    """The warps one program runs."""
    if backend == "mosaic_gpu":
        return 4  # one warpgroup (jax's Mosaic GPU: one Pallas thread = 4 warps)
    return int(getattr(call.compiler_params, "num_warps", None) or 4)


def occupancy(gpu: Gpu, smem: int, warps: int) -> int:
    """Programs one SM runs at once: as many as its shared memory, warps and block slots
    allow, at least one."""
    by_smem = gpu.smem_per_sm_bytes // smem if smem else gpu.max_blocks_per_sm
    return max(1, min(gpu.max_blocks_per_sm, gpu.max_warps_per_sm // max(warps, 1), by_smem))


def wave_bytes(call: Call, concurrent: int) -> tuple[int, list[int]]:
    """HBM bytes of one run, and per operand: each wave fetches a block once however many
    of its programs read it; outputs are written by their programs."""
    order = launch_order(call.grid)
    per_operand = []
    for op in call.operands:
        if op.indices is None:
            per_operand.append(0)
            continue
        sizes = block_bytes(op)
        if op.role == "output":
            per_operand.append(int(sizes.sum()))
            continue
        total = 0
        for start in range(0, len(order), concurrent):
            wave = order[start : start + concurrent]
            _, first = np.unique(op.indices[wave], axis=0, return_index=True)
            total += int(sizes[wave][first].sum())
        per_operand.append(total)
    return sum(per_operand), per_operand


def busiest_sm(work: np.ndarray, sms: int) -> float:
    """The least work the busiest SM can have: some SM runs ``ceil(programs / SMs)``
    programs (at least the smallest ones), none less than the largest program, and all
    together the total over ``sms`` SMs. Equal programs: ``ceil(n / SMs)`` of them; unequal
    ones (causal attention) never above what any schedule gives, so the term stays a
    lower bound (the floor guard's)."""
    if not len(work):
        return 0.0
    rounds = -(-len(work) // sms)
    smallest = float(np.sort(work)[:rounds].sum())
    return max(smallest, float(work.max()), float(work.sum()) / sms)
