"""The TPU pipeline of one ``pallas_call``, step by step (pure numpy over extracted data).

Semantics, from jax's Pallas TPU documentation (docs/pallas/tpu/details.rst, "Noteworthy
properties"; docs/pallas/tpu/pipelining.md, "Multiple Buffering") and the Mosaic lowering:

- the grid runs sequentially in lexicographic order, last dimension fastest;
- an input block is copied HBM -> VMEM when its block index differs from the previous
  step's ("when two consecutive grid indices use the same slice of an input, the HBM
  transfer for the second iteration is skipped");
- an output block is written back when the next step's index differs, and at the end
  (writes to one output block must be consecutive steps);
- each pipelined operand has 2 buffers unless its BlockSpec's ``pipeline_mode`` is
  ``pl.Buffered(n)``; ``memory_space=ANY`` operands are not pipelined (the body copies
  what it needs, counted from its DMAs);
- a megacore chip splits the outermost ``parallel`` grid dimension in two contiguous halves,
  one per TensorCore; each half is its own sequence, so a block needed by both is fetched
  by both.

Time of a sequence of steps on one TensorCore (docs/MODEL.md, "Time"): DMAs run on their own
engines, overlapped with the step before (double buffering). The MXU, the vector ALUs and
the EUP issue from the same VLIW bundles, each in its own slots, so within a step they
overlap and the busiest sets the pace; the fixed per-step cost is the scalar core's, in
the same instruction stream, and adds. So each step costs
``max(max(MXU, VALU, EUP) + overhead, DMA in flight)``, plus the first step's fetch
(prologue) and the last write-back (epilogue); an operand with one buffer cannot overlap,
its copies add to its step, and so do the body's own copies it waits on with no work issued
since they started (a ``sync_copy``, a write started after the step's last dot). A body
(or a loop iteration in it) that waits on manual copies takes at least a copy's round trip
unless its work hides it, and each copy waited costs the scalar core (model revision 7).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ci_bench.measure.model.calls import Call, Operand
from ci_bench.measure.model.chips import Chip
from ci_bench.measure.model.jaxpr_read import padded_bytes


def changed(indices: np.ndarray) -> np.ndarray:
    """[steps] True where the block index differs from the previous step's (first: True)."""
    if len(indices) == 0:
        return np.zeros(0, bool)
    diff = np.any(indices[1:] != indices[:-1], axis=1)
    return np.concatenate([[True], diff])


def block_bytes(op: Operand) -> np.ndarray:
    """[steps] bytes of the block each step addresses, clipped to the array's edge."""
    assert op.block is not None
    assert op.indices is not None
    block = np.asarray(op.block, np.int64)
    starts = np.where(op.element_dims, op.indices, op.indices * block)
    extent = np.clip(np.asarray(op.shape, np.int64) - starts, 0, block)
    return np.prod(extent, axis=1) * op.itemsize


def vmem_block_bytes(op: Operand) -> int:
    """One buffer of the operand's block, as laid out in VMEM (padded to the tile)."""
    if op.memory_space == "smem":
        return math.prod(op.kernel_block) * max(op.itemsize, 4)
    return padded_bytes(op.kernel_block, op.itemsize)


@dataclass(frozen=True)
class Traffic:
    """What one operand moves along one sequence of steps."""

    copies: int
    fetch: np.ndarray  # [steps] bytes copied HBM -> VMEM before each step (inputs)
    write: np.ndarray  # [steps] bytes written back after each step (outputs)

    @property
    def bytes(self) -> int:
        return int(self.fetch.sum() + self.write.sum())


def traffic(op: Operand, order: np.ndarray) -> Traffic:
    """The copies of ``op`` when the grid runs the steps ``order`` (flat ids) in sequence."""
    n = len(order)
    if op.indices is None:
        zeros = np.zeros(n, np.int64)
        return Traffic(0, zeros, zeros)
    idx = op.indices[order]
    sizes = block_bytes(op)[order]
    new = changed(idx)
    if op.role == "input":
        return Traffic(int(new.sum()), np.where(new, sizes, 0), np.zeros(n, np.int64))
    last = np.concatenate([new[1:], [True]]) if n else new  # a run ends: written back
    return Traffic(int(last.sum()), np.zeros(n, np.int64), np.where(last, sizes, 0))


def core_orders(call: Call, cores: int) -> list[np.ndarray]:
    """The flat step ids each TensorCore runs, in order: the outermost parallel dimension
    split in two contiguous halves on a megacore chip; everything on one core otherwise."""
    everything = np.arange(call.steps)
    semantics = call.semantics or ()
    split = next(
        (d for d, s in enumerate(semantics) if "parallel" in s and call.grid[d] >= 2), None
    )
    if cores < 2 or split is None:
        return [everything]
    coord = np.unravel_index(everything, call.grid)[split]
    half = -(-call.grid[split] // 2)
    return [everything[coord < half], everything[coord >= half]]


@dataclass(frozen=True)
class Timing:
    """One call (one run) on one chip."""

    seconds: float
    compute_s: float
    vector_s: float  # VALU time
    eup_s: float  # EUP (transcendental) time
    memory_s: float
    overhead_s: float
    hbm_bytes: int
    cores_used: int


def _sequence_time(
    call: Call, order: np.ndarray, chip: Chip, fetches: list[Traffic], ops: list[Operand]
) -> tuple[float, float, float, float, float, float, int]:
    n = len(order)
    bw = chip.model_hbm_bytes_per_s
    step = call.step
    wide = chip.mxu_column_size >= 256
    compute = (step.bf16_flops_wide if wide else step.bf16_flops) / chip.mxu_flops_per_s
    int8 = step.int8_flops_wide if wide else step.int8_flops
    if int8:
        compute += int8 / chip.mxu_int8_ops_per_s
    packed = chip.bf16_vpu
    vector = (step.vpu_ops_packed if packed else step.vpu_ops) / chip.vpu_ops_per_s
    eup = (step.eup_ops_packed if packed else step.eup_ops) / chip.eup_ops_per_s
    overhead = chip.step_overhead_us * 1e-6 * (1 + step.inner_steps)
    overlapped_in = np.zeros(n)
    overlapped_out = np.zeros(n)
    serial = np.zeros(n)
    for op, t in zip(ops, fetches, strict=True):
        if op.buffers == 1:
            serial += t.fetch + t.write
        else:
            overlapped_in += t.fetch
            overlapped_out += t.write
    manual = float(step.dma_read_bytes + step.dma_write_bytes)
    exposed = min(float(step.exposed_dma_bytes), manual)  # waited with no work since started
    in_flight = np.zeros(n)
    in_flight[:-1] += overlapped_in[1:]  # the next step's inputs, fetched during this one
    in_flight[1:] += overlapped_out[:-1]  # the previous step's outputs, written during it
    in_flight += manual - exposed
    # A copy's round trip paces an iteration that waits on it unless work hides it; each
    # wait costs the scalar core (chips.py: DMA_ROUND_TRIP_US, DMA_WAIT_US).
    round_trips = step.wait_rounds * chip.dma_round_trip_us * 1e-6
    busiest = max(compute, vector, eup)
    overhead += step.dma_waits * chip.dma_wait_us * 1e-6 + max(0.0, round_trips - busiest)
    busy = busiest + overhead + (serial + exposed) / bw
    seconds = float(np.maximum(busy, in_flight / bw).sum())
    if n:
        seconds += overlapped_in[0] / bw + overlapped_out[-1] / bw  # prologue, epilogue
    moved = int(overlapped_in.sum() + overlapped_out.sum() + serial.sum() + manual * n)
    return seconds, compute * n, vector * n, eup * n, moved / bw, overhead * n, moved


def time_on(call: Call, chip: Chip) -> Timing:
    """The modelled time of one run of ``call`` on ``chip`` (slowest TensorCore)."""
    ops = list(call.operands)
    results = []
    for order in core_orders(call, chip.tensor_cores):
        fetches = [traffic(op, order) for op in ops]
        results.append(_sequence_time(call, order, chip, fetches, ops))
    slowest = max(results, key=lambda r: r[0])
    return Timing(
        seconds=slowest[0],
        compute_s=slowest[1],
        vector_s=slowest[2],
        eup_s=slowest[3],
        memory_s=slowest[4],
        overhead_s=slowest[5],
        hbm_bytes=sum(r[6] for r in results),
        cores_used=len(results),
    )


def vmem_buffers(op: Operand) -> int:
    """The VMEM buffers Mosaic gives a pipelined operand: its ``buffers``, but one for a
    block that is the same at every grid step (nothing to prefetch). On a TPU v5e, 628
    tilings of the project's matmul at 1024³, 2048³ and 4096³ (benchmarks/tpu_matmul_sweep.py):
    counting two buffers disagreed with the compiler on 11, among them every single-step
    grid at 1024³ counted at 16-24 MiB that compiled; counting one for a fixed block, on 4."""
    indices = op.indices
    if indices is not None and len(indices) and bool(np.all(indices == indices[0])):
        return min(op.buffers, 1)
    return op.buffers


def vmem_bytes(call: Call) -> int:
    """Pipeline buffers of every VMEM operand, VMEM scratch, run_scoped allocations and the
    body's own values Mosaic keeps in VMEM (``temporaries``)."""
    buffers = sum(
        vmem_buffers(op) * vmem_block_bytes(op) for op in call.operands if op.memory_space == "vmem"
    )
    scratch = call.scratch_vmem_bytes + call.step.scoped_vmem_bytes
    return buffers + scratch + call.temporaries_vmem_bytes


def smem_bytes(call: Call) -> int:
    blocks = sum(
        op.buffers * vmem_block_bytes(op) for op in call.operands if op.memory_space == "smem"
    )
    return blocks + call.smem_bytes
