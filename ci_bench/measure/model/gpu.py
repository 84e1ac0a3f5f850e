"""The cost model of a case on an NVIDIA GPU: grid programs in waves over the SMs (pure).

A GPU runs a ``pallas_call``'s grid programs in parallel, one thread block each, as many
at once on an SM as its shared memory, warps and block slots allow (the occupancy); blocks
are launched in order, grid dimension 0 fastest (Pallas maps it to CUDA's ``x``; both in
``gpuwaves``). Per call:

- **tensor cores**: each SM runs its programs' dots at its share of the GPU's dense peak
  for their operands' kind (``gpubody``), so the compute term is
  ``ceil(programs / SMs) x FLOPs per program / (peak / SMs)``: a partial last wave costs a
  whole round of the busiest SM;
- **HBM**: a Mosaic GPU program reads its input blocks and writes its output blocks (the
  block specs, at every grid step); a Triton program what its body loads and stores, in
  the branches and trip counts it takes (``gputraffic``: a Triton block spec moves
  nothing); the programs of one wave run together, so a block several of
  them read is fetched from HBM once per wave and served from L2 to the others; nothing is
  assumed to survive in L2 from one wave to the next (a lower bound on reuse: bytes are an
  upper bound between "every program alone" and "each array once");
- **time**: ``max(tensor cores, HBM)``: loads overlap the MMAs (Triton's software
  pipeline, Mosaic GPU's ``max_concurrent_steps``).

Not in the time, and said so: kernel launch and per-program latency (small kernels model
optimistic), register limits on occupancy, L2 bandwidth. Non-matmul work (``gpubody``) is
timed at the CUDA cores' rate beside the figure (``GpuDetail.vector_us``); when it exceeds
a tenth of the modelled time the case is ``partial`` (the vector term is the TPU model's
issue 39; it is wired in here once it lands). Peaks and sizes: ``schema.gpus``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ci_bench.measure.model.calls import Call
from ci_bench.measure.model.extract import Choice, Item, Walk
from ci_bench.measure.model.gpubody import GpuWork, gpu_work
from ci_bench.measure.model.gputraffic import Traffic, hbm_bytes, triton_traffic
from ci_bench.measure.model.gpuwaves import (
    busiest_sm,
    launch_order,
    occupancy,
    smem_per_program,
    warps_of,
    wave_bytes,
)
from ci_bench.schema.gpu_model import GpuDetail
from ci_bench.schema.gpus import Gpu
from ci_bench.schema.model import MODEL_REVISION, CallModel, CaseModel, ChipModel, OperandModel

# Past this share of the modelled time, non-matmul work makes the GPU model partial.
VECTOR_SHARE = 0.10
NOT_TIMED = (
    "GPU: kernel launch and per-program latency, register limits and L2 bandwidth are not "
    "timed (small kernels model optimistic)"
)


def backend_of(call: Call) -> str:
    """triton or mosaic_gpu, from the call's compiler params (jax's default: Mosaic GPU)."""
    name = type(call.compiler_params).__module__ if call.compiler_params is not None else ""
    return "triton" if "triton" in name else "mosaic_gpu"


@dataclass(frozen=True)
class CallOnGpu:
    seconds: float
    compute_s: float
    memory_s: float
    vector_s: float
    hbm_bytes: int
    per_operand: list[int]
    detail: GpuDetail


def traffic_of(call: Call) -> Traffic | None:
    """A Triton call's body traffic (its loads and stores); None for Mosaic GPU, whose
    pipeline copies the block specs."""
    if call.body is None or backend_of(call) != "triton":
        return None
    return triton_traffic(call)


def total_flops(call: Call, work: GpuWork, traffic: Traffic | None) -> float:
    """Tensor-core FLOPs of one run: per program where the body's branches were followed."""
    if traffic is None:
        return work.flops * call.steps
    return float(sum(f.sum() for f in traffic.tensor_flops.values()))


def call_on(call: Call, work: GpuWork, gpu: Gpu, traffic: Traffic | None = None) -> CallOnGpu:
    """One run of ``call`` on ``gpu``: a Triton call's traffic and work from its body's
    loads, stores and branches per program (``gputraffic``), a Mosaic GPU call's from its
    block specs."""
    backend = backend_of(call)
    smem = smem_per_program(call, work, backend)
    occ = occupancy(gpu, smem, warps_of(call, backend))
    programs = call.steps
    if traffic is not None:
        return _triton_on(call, traffic, gpu, smem, occ)
    peaks = {
        "bf16": gpu.bf16_flops_per_s,
        "tf32": gpu.tf32_flops_per_s,
        "fp32": gpu.fp32_flops_per_s,
        "fp8": gpu.fp8_flops_per_s,
        "int8": gpu.int8_ops_per_s,
    }
    rounds = -(-programs // gpu.sms)  # programs on the busiest SM
    compute = sum(rounds * f / (peaks[k] / gpu.sms) for k, f in work.tensor_flops.items())
    hbm, per_operand = wave_bytes(call, gpu.sms * occ)
    memory = hbm / gpu.hbm_bytes_per_s
    # FP32 peak counts an FMA as 2 FLOPs; an elementwise result is one instruction, a
    # transcendental one eight (the SFUs' rate).
    results_per_s = gpu.fp32_flops_per_s / 2
    vector = rounds * (work.element_ops + 8 * work.transcendental_ops) / (results_per_s / gpu.sms)
    detail = _detail(gpu, backend, programs, occ, smem, vector)
    return CallOnGpu(max(compute, memory), compute, memory, vector, hbm, per_operand, detail)


def _detail(gpu: Gpu, backend: str, programs: int, occ: int, smem: int, vector: float) -> GpuDetail:
    """The wave figures a GPU call's model reports, however its traffic was read."""
    return GpuDetail(
        backend=backend,  # type: ignore[arg-type]
        sms=gpu.sms,
        programs=programs,
        waves=-(-programs // (gpu.sms * occ)),
        occupancy=occ,
        smem_per_program_bytes=smem,
        vector_us=vector * 1e6,
    )


def _triton_on(call: Call, traffic: Traffic, gpu: Gpu, smem: int, occ: int) -> CallOnGpu:
    """The programs that do work, in launch order, over the SMs; the tensor-core term is
    the busiest SM's least work (``busiest_sm``)."""
    active = traffic.active()
    n = max(int(active.sum()), 1)
    rounds = -(-n // gpu.sms)
    peaks = {
        "bf16": gpu.bf16_flops_per_s,
        "tf32": gpu.tf32_flops_per_s,
        "fp32": gpu.fp32_flops_per_s,
        "fp8": gpu.fp8_flops_per_s,
        "int8": gpu.int8_ops_per_s,
    }
    compute = sum(
        busiest_sm(f[active], gpu.sms) / (peaks[k] / gpu.sms)
        for k, f in traffic.tensor_flops.items()
    )
    order = launch_order(call.grid)
    hbm, per_operand = hbm_bytes(traffic, order, gpu.sms * occ, len(call.operands))
    memory = hbm / gpu.hbm_bytes_per_s
    assert traffic.element_ops is not None
    assert traffic.transcendental_ops is not None
    ops = float((traffic.element_ops + 8 * traffic.transcendental_ops)[active].sum()) / n
    vector = rounds * ops / (gpu.fp32_flops_per_s / 2 / gpu.sms)
    detail = _detail(gpu, "triton", n, occ, smem, vector)
    return CallOnGpu(max(compute, memory), compute, memory, vector, hbm, per_operand, detail)


def _chip(gpu: Gpu, runs: Sequence[tuple[Call, CallOnGpu]], flops: float) -> ChipModel:
    seconds = sum(r.seconds * c.count for c, r in runs)
    compute = sum(r.compute_s * c.count for c, r in runs)
    memory = sum(r.memory_s * c.count for c, r in runs)
    smem = max((r.detail.smem_per_program_bytes for _, r in runs), default=0)
    estimated = any(r.detail.backend == "triton" for _, r in runs)
    warning = None
    if smem > gpu.smem_per_block_bytes:
        warning = (
            f"{gpu.name}: at least {smem:,} B of shared memory per program (Triton's pipelined "
            f"dot tiles, a lower bound) exceed the {gpu.smem_per_block_bytes:,} B a block may use"
        )
    biggest = max((r for _, r in runs), key=lambda r: r.detail.programs)
    detail = biggest.detail.model_copy(
        update={
            "programs": sum(r.detail.programs * c.count for c, r in runs),
            "waves": sum(r.detail.waves * c.count for c, r in runs),
            "vector_us": sum(r.detail.vector_us * c.count for c, r in runs),
            "smem_per_program_bytes": smem,
        }
    )
    return ChipModel(
        vmem_limit_bytes=gpu.smem_per_block_bytes,
        vmem_limit_source="default",
        vmem_capacity_bytes=gpu.smem_per_block_bytes,
        vmem_bytes=smem,
        fits=not (smem > gpu.smem_per_block_bytes and not estimated),
        why_not=None if smem <= gpu.smem_per_block_bytes or estimated else warning,
        vmem_warning=warning if estimated else None,
        modelled_us=seconds * 1e6,
        compute_us=compute * 1e6,
        memory_us=memory * 1e6,
        overhead_us=0.0,
        bound="compute" if compute >= memory else "memory",
        mfu_ceiling=flops / (seconds * gpu.bf16_flops_per_s) if seconds > 0 else None,
        tensor_cores=max(1, min(gpu.sms, biggest.detail.programs)),
        hbm_bytes=sum(r.hbm_bytes * c.count for c, r in runs),
        gpu=detail,
    )


def _calls(items: Sequence[Item], notes: list[str]) -> list[Call]:
    """Calls in order, a cond's costliest branch (most grid steps, then FLOPs) taken."""
    found: list[Call] = []
    for item in items:
        if isinstance(item, Choice):
            branches = [_calls(b, notes) for b in item.branches]
            found += max(branches, key=lambda cs: (sum(c.steps for c in cs), len(cs)))
            if item.why not in notes:
                notes.append(item.why)
        else:
            found.append(item)
    return found


def gpu_case_model(
    walked: Walk,
    gpus: Sequence[Gpu],
    *,
    spec_flops: int | None,
    flops_factor: float = 2.0,
    check_flops: bool = True,
) -> CaseModel:
    """The case's model on ``gpus`` from its GPU trace (the platform's branch of the
    kernel), or why it has none."""
    notes: list[str] = []
    calls = _calls(walked.items, notes)
    not_modelled = list(walked.not_modelled)
    if not calls:
        reason = "no pallas_call on the GPU path of the traced kernel"
        if not_modelled:
            reason += f" ({'; '.join(not_modelled)})"
        return CaseModel(status="not_modelled", reason=reason)
    works = [gpu_work(c.body) if c.body is not None else GpuWork() for c in calls]
    traffics = [traffic_of(c) for c in calls]
    for t in traffics:
        notes += [f"GPU (Triton body): {n}" for n in (t.notes if t else []) if n not in notes]
    for call, work, traffic in zip(calls, works, traffics, strict=True):
        if traffic is None and any(op.indices is None for op in call.operands):
            not_modelled.append(
                "an operand in ANY/GMEM memory space: the body's own copies are not read"
            )
        gaps = traffic.unknown if traffic is not None else work.not_modelled
        not_modelled += [n for n in gaps if n not in not_modelled]
    flops = int(
        sum(total_flops(c, w, t) * c.count for c, w, t in zip(calls, works, traffics, strict=True))
    )
    runs = {
        g.name: [(c, call_on(c, w, g, t)) for c, w, t in zip(calls, works, traffics, strict=True)]
        for g in gpus
    }
    chips = {g.name: _chip(g, runs[g.name], flops) for g in gpus}
    for chip in chips.values():
        assert chip.gpu is not None
        if chip.modelled_us and chip.gpu.vector_us > VECTOR_SHARE * chip.modelled_us:
            why = (
                f"non-matmul work in the body (~{chip.gpu.vector_us:,.1f} µs at the CUDA "
                f"cores' rate, past {VECTOR_SHARE:.0%} of the modelled time) is not in the "
                "GPU model's compute term yet"
            )
            if why not in not_modelled:
                not_modelled.append(why)
            break
    notes.append(NOT_TIMED)
    ratio = flops / spec_flops if spec_flops else None
    check = None
    if check_flops and spec_flops is not None:
        check = "ok" if ratio and 1 / flops_factor <= ratio <= flops_factor else "mismatch"
    first = runs[gpus[0].name] if gpus else []
    call_models = [
        _call_model(c, r, total_flops(c, w, t))
        for (c, r), w, t in zip(first, works, traffics, strict=True)
    ]
    hbm = sum(m.hbm_bytes for m in call_models)
    return CaseModel(
        status="partial" if not_modelled else "ok",
        reason=f"partial model, no modelled time: {'; '.join(not_modelled)}"
        if not_modelled
        else None,
        hbm_bytes=hbm,
        ideal_bytes=sum(m.ideal_bytes for m in call_models),
        vmem_bytes=max((m.vmem_bytes for m in call_models), default=0),
        grid_steps=sum(m.grid_steps for m in call_models),
        flops=flops,
        spec_flops=spec_flops,
        flops_ratio=ratio,
        flops_check=check,  # type: ignore[arg-type]
        chips=chips,
        calls=call_models,
        not_modelled=not_modelled,
        notes=notes,
        revision=MODEL_REVISION,
    )


def _call_model(call: Call, run: CallOnGpu, flops: float) -> CallModel:
    """One call's figures on the first target GPU (its operands' wave traffic)."""
    operands = [
        OperandModel(
            role=op.role,  # type: ignore[arg-type]
            index=op.index,
            origin=op.origin,
            shape=list(op.shape),
            dtype=op.dtype,
            block_shape=list(op.block) if op.block is not None else None,
            memory_space="any" if op.indices is None else "vmem",
            buffers=op.buffers,
            copies=(call.steps if op.indices is not None else 0) * call.count,
            hbm_bytes=moved * call.count,
            ideal_bytes=op.nbytes * call.count,
            reread=moved / op.nbytes if op.nbytes and op.indices is not None else None,
            vmem_bytes=0,
            aliased_to=op.aliased_to,
        )
        for op, moved in zip(call.operands, run.per_operand, strict=True)
    ]
    worst = max((o for o in operands if o.reread), key=lambda o: o.reread or 0, default=None)
    return CallModel(
        name=call.name,
        count=call.count,
        grid=list(call.grid),
        grid_steps=call.steps * call.count,
        hbm_bytes=run.hbm_bytes * call.count,
        ideal_bytes=sum(o.ideal_bytes for o in operands),
        vmem_bytes=run.detail.smem_per_program_bytes,
        flops=int(flops * call.count),
        reread_operand=f"{worst.origin} ({worst.reread:.3g}x)"
        if worst and (worst.reread or 0) > 1
        else None,
        operands=operands,
        notes=[
            f"{run.detail.backend}: {run.detail.waves} wave(s) of {run.detail.occupancy} "
            f"program(s) per SM on {run.detail.sms} SMs"
        ],
    )
