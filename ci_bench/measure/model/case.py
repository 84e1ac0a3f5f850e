"""A case's model from its extracted calls: per call, summed, per target chip (pure)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ci_bench.measure.model.calls import Call
from ci_bench.measure.model.chips import Chip
from ci_bench.measure.model.extract import Choice, Item, Walk
from ci_bench.measure.model.pipeline import (
    block_bytes,
    smem_bytes,
    time_on,
    traffic,
    vmem_block_bytes,
    vmem_buffers,
    vmem_bytes,
)
from ci_bench.schema.model import (
    MODEL_REVISION,
    TRACES_DIFFERENTLY,
    CallModel,
    CaseModel,
    ChipModel,
    GpuBound,
    OperandModel,
)

MIB = 1024 * 1024


def _mib(n: int) -> str:
    return f"{n / MIB:.2f} MiB"


def _operands(call: Call) -> list[OperandModel]:
    order = np.arange(call.steps)
    found = []
    for op in call.operands:
        moved = traffic(op, order)
        reread = moved.bytes / op.nbytes if op.indices is not None and op.nbytes else None
        found.append(
            OperandModel(
                role=op.role,  # type: ignore[arg-type]
                index=op.index,
                origin=op.origin,
                shape=list(op.shape),
                dtype=op.dtype,
                block_shape=list(op.block) if op.block is not None else None,
                memory_space=op.memory_space,  # type: ignore[arg-type]
                buffers=vmem_buffers(op),  # one for a block the same at every step
                copies=moved.copies * call.count,
                hbm_bytes=moved.bytes * call.count,
                ideal_bytes=op.nbytes * call.count,
                reread=reread,
                vmem_bytes=vmem_buffers(op) * vmem_block_bytes(op) if op.indices is not None else 0,
                aliased_to=op.aliased_to,
            )
        )
    return found


def _fit(
    call_vmem: int, call_smem: int, limit: int | None, chip: Chip
) -> tuple[str | None, str | None]:
    """(why a call's buffers do not fit ``chip``, a warning when they pass a default limit
    that has no solid source): (None, None) when they fit."""
    applied = limit or chip.scoped_vmem_bytes
    where = "its vmem_limit_bytes" if limit else "the default scoped VMEM limit"
    if limit and limit > chip.vmem_capacity_bytes:
        why = f"vmem_limit_bytes {_mib(limit)} exceeds the {_mib(chip.vmem_capacity_bytes)} of VMEM"
        return f"{chip.name}: {why}", None
    if call_smem > chip.smem_capacity_bytes:
        return f"{chip.name}: {call_smem} B of SMEM exceed its {chip.smem_capacity_bytes} B", None
    # Measured on a TPU v5e (benchmarks/tpu_microbench.py vmem, 108 compiles of matmul
    # tilings, model revision 5): blocks and scratch must stay strictly under the limit,
    # the default scoped one or a kernel's vmem_limit_bytes (Mosaic keeps some for itself).
    # 107 of 108 agree; float32 (2048, 512, 2048) at exactly a 64 MiB limit compiled.
    if call_vmem < applied:
        return None, None
    over = f"{chip.name}: {_mib(call_vmem)} of VMEM (blocks, scratch, the body's values) exceed"
    over += f" {where}"
    over += f" of {_mib(applied)}"
    if limit or chip.scoped_vmem_solid or call_vmem > chip.vmem_capacity_bytes:
        return over, None
    return None, f"{over} (an assumed default, no solid source: a warning, not an error)"


def _chip_model(call: Call, chip: Chip, vmem: int, smem: int, flops: int) -> ChipModel:
    timing = time_on(call, chip)
    why, warning = _fit(vmem, smem, call.vmem_limit_bytes, chip)
    terms = {
        "compute": timing.compute_s,
        "vector": max(timing.vector_s, timing.eup_s),
        "memory": timing.memory_s,
        "overhead": timing.overhead_s,
    }
    seconds = timing.seconds * call.count
    peak = chip.bf16_flops_per_s * chip.tensor_cores
    return ChipModel(
        vmem_limit_bytes=call.vmem_limit_bytes or chip.scoped_vmem_bytes,
        vmem_limit_source="kernel" if call.vmem_limit_bytes else "default",
        vmem_capacity_bytes=chip.vmem_capacity_bytes,
        vmem_bytes=vmem,
        smem_bytes=smem,
        smem_capacity_bytes=chip.smem_capacity_bytes,
        fits=why is None,
        why_not=why,
        vmem_warning=warning,
        modelled_us=seconds * 1e6,
        compute_us=timing.compute_s * call.count * 1e6,
        vector_us=timing.vector_s * call.count * 1e6,
        eup_us=timing.eup_s * call.count * 1e6,
        memory_us=timing.memory_s * call.count * 1e6,
        overhead_us=timing.overhead_s * call.count * 1e6,
        bound=max(terms, key=terms.__getitem__),  # type: ignore[arg-type]
        mfu_ceiling=flops / (seconds * peak) if seconds > 0 and peak > 0 else None,
        tensor_cores=timing.cores_used,
        hbm_bytes=timing.hbm_bytes * call.count,
        grid_steps=call.steps * call.count,
        mxu_fraction=chip.mxu_fraction,
    )


def call_model(call: Call, chips: Sequence[Chip]) -> CallModel:
    """One call's figures (times its count) and its model on every chip."""
    operands = _operands(call)
    manual = (call.step.dma_read_bytes + call.step.dma_write_bytes) * call.steps * call.count
    hbm = sum(o.hbm_bytes for o in operands) + manual
    aliased_outputs = {op.aliased_to for op in call.operands if op.aliased_to is not None}
    ideal = sum(
        o.ideal_bytes
        for o in operands
        if not (o.role == "output" and o.index in aliased_outputs)  # one array, counted once
    )
    vmem, smem = vmem_bytes(call), smem_bytes(call)
    flops = call.step.flops * call.steps * call.count
    worst = max(
        (o for o in operands if o.reread is not None), key=lambda o: o.reread or 0, default=None
    )
    reread = f"{worst.origin} ({worst.reread:.3g}x)" if worst and (worst.reread or 0) > 1 else None
    return CallModel(
        name=call.name,
        count=call.count,
        grid=list(call.grid),
        grid_steps=call.steps * call.count,
        dimension_semantics=list(call.semantics) if call.semantics else None,
        hbm_bytes=hbm,
        ideal_bytes=ideal,
        vmem_bytes=vmem,
        scratch_bytes=call.scratch_vmem_bytes + call.step.scoped_vmem_bytes,
        smem_bytes=smem,
        flops=flops,
        manual_dma_bytes=manual,
        vmem_limit_bytes=call.vmem_limit_bytes,
        reread_operand=reread,
        operands=operands,
        chips={c.name: _chip_model(call, c, vmem, smem, flops) for c in chips},
        notes=list(dict.fromkeys([*call.notes, *call.step.notes])),
    )


def _resolve(items: Sequence[Item], chips: Sequence[Chip], notes: list[str]) -> list[CallModel]:
    """Calls in order; each Choice replaced by its costliest branch (HBM bytes, then steps,
    then FLOPs: the same branch for every chip)."""
    found: list[CallModel] = []
    for item in items:
        if isinstance(item, Choice):
            branches = [_resolve(b, chips, notes) for b in item.branches]

            def weight(models: list[CallModel]) -> tuple[int, int, int]:
                return (
                    sum(m.hbm_bytes for m in models),
                    sum(m.grid_steps for m in models),
                    sum(m.flops for m in models),
                )

            found += max(branches, key=weight)
            if item.why not in notes:
                notes.append(item.why)
        else:
            found.append(call_model(item, chips))
    return found


def _sum_chips(
    calls: Sequence[CallModel], chips: Sequence[Chip], flops: int, outside: int = 0
) -> dict:
    """Per chip: the calls one after another, then the XLA operations around them
    (``outside`` bytes at the chip's HBM bandwidth: they run between the kernels)."""
    out = {}
    for chip in chips:
        per = [c.chips[chip.name] for c in calls]
        outside_us = outside / chip.model_hbm_bytes_per_s * 1e6
        seconds = (sum(p.modelled_us for p in per) + outside_us) / 1e6
        kernels_memory_us = sum(p.memory_us for p in per)
        terms = {
            "compute": sum(p.compute_us for p in per),
            "vector": max(sum(p.vector_us or 0 for p in per), sum(p.eup_us or 0 for p in per)),
            "memory": kernels_memory_us + outside_us,
            "overhead": sum(p.overhead_us for p in per),
        }
        tightest = max(per, key=lambda p: p.vmem_bytes / p.vmem_limit_bytes)
        failing = next((p for p in per if not p.fits), None)
        peak = chip.bf16_flops_per_s * chip.tensor_cores
        out[chip.name] = ChipModel(
            vmem_limit_bytes=tightest.vmem_limit_bytes,
            vmem_limit_source=tightest.vmem_limit_source,
            vmem_capacity_bytes=chip.vmem_capacity_bytes,
            vmem_bytes=max(p.vmem_bytes for p in per),
            smem_bytes=max(p.smem_bytes for p in per),
            smem_capacity_bytes=chip.smem_capacity_bytes,
            fits=failing is None,
            why_not=failing.why_not if failing else None,
            vmem_warning=next((p.vmem_warning for p in per if p.vmem_warning), None),
            modelled_us=seconds * 1e6,
            compute_us=terms["compute"],
            vector_us=sum(p.vector_us or 0 for p in per),
            eup_us=sum(p.eup_us or 0 for p in per),
            memory_us=kernels_memory_us,
            outside_us=outside_us,
            overhead_us=terms["overhead"],
            bound=max(terms, key=terms.__getitem__),  # type: ignore[arg-type]
            mfu_ceiling=flops / (seconds * peak) if seconds > 0 and peak > 0 else None,
            tensor_cores=max(p.tensor_cores for p in per),
            hbm_bytes=sum(p.hbm_bytes for p in per),
            grid_steps=sum(p.grid_steps or 0 for p in per),
            mxu_fraction=chip.mxu_fraction,
        )
    return out


def gpu_bound(items: Sequence[Item]) -> GpuBound | None:
    """Triton runs grid programs in parallel with no revisit elision: every program loads
    (and stores) its own blocks. An upper bound on DRAM traffic (L2 hits not modelled)."""
    total = steps = 0
    for item in items:
        if isinstance(item, Choice):
            options = [gpu_bound(b) for b in item.branches]
            worst = max((o for o in options if o), key=lambda o: o.hbm_bytes, default=None)
            if worst:
                total, steps = total + worst.hbm_bytes, steps + worst.grid_steps
            continue
        per_run = sum(int(block_bytes(op).sum()) for op in item.operands if op.indices is not None)
        manual = (item.step.dma_read_bytes + item.step.dma_write_bytes) * item.steps
        total += (per_run + manual) * item.count
        steps += item.steps * item.count
    return GpuBound(hbm_bytes=total, grid_steps=steps) if steps else None


def _all_calls(items: Sequence[Item]) -> list[Call]:
    found: list[Call] = []
    for item in items:
        if isinstance(item, Choice):
            for branch in item.branches:
                found += _all_calls(branch)
        else:
            found.append(item)
    return found


def case_model(
    tpu: Walk,
    chips: Sequence[Chip],
    *,
    spec_flops: int | None,
    flops_factor: float = 2.0,
    gpu: Walk | None = None,
    model_ms: float | None = None,
    check_flops: bool = True,
    outside_bytes: int = 0,
) -> CaseModel:
    """The case's model, or why it has none (no pallas_call on the TPU path).
    ``check_flops`` False (a ``compute_unit="vector"`` kernel: its FLOPs are VPU work):
    the MXU FLOPs are not checked against the SPEC's, so no mismatch warning.
    ``outside_bytes``: what the XLA operations around the kernels move (``outside``)."""
    notes: list[str] = []
    calls = _resolve(tpu.items, chips, notes)
    not_modelled = list(tpu.not_modelled)
    if not calls:
        reason = "no pallas_call on the TPU path of the traced kernel"
        if not_modelled:
            reason += f" ({'; '.join(not_modelled)})"
        return CaseModel(status="not_modelled", reason=reason, model_ms=model_ms)
    for call in _all_calls(tpu.items):
        not_modelled += [n for n in call.step.not_modelled if n not in not_modelled]
    for c in calls:
        notes += [n for n in c.notes if n not in notes]
    flops = sum(c.flops for c in calls)
    ratio = check = None
    if spec_flops is not None:
        ratio = flops / spec_flops if spec_flops > 0 else None
        if check_flops and ratio is not None:
            check = "mismatch" if not 1 / flops_factor <= ratio <= flops_factor else "ok"
        elif check_flops:
            check = "unverifiable"
    partial = f"partial model, no modelled time: {'; '.join(not_modelled)}"
    return CaseModel(
        status="partial" if not_modelled else "ok",
        reason=partial if not_modelled else None,
        hbm_bytes=sum(c.hbm_bytes for c in calls),
        ideal_bytes=sum(c.ideal_bytes for c in calls),
        vmem_bytes=max(c.vmem_bytes for c in calls),
        grid_steps=sum(c.grid_steps for c in calls),
        flops=flops,
        spec_flops=spec_flops,
        flops_ratio=ratio,
        flops_check=check,  # type: ignore[arg-type]
        chips=_sum_chips(calls, chips, flops, outside_bytes),
        outside_bytes=outside_bytes,
        calls=calls,
        gpu=gpu_bound(gpu.items) if gpu is not None else None,
        not_modelled=not_modelled,
        notes=notes,
        model_ms=model_ms,
        revision=MODEL_REVISION,
    )


def merge_chips(models: Sequence[CaseModel], names: Sequence[str], model_ms: float) -> CaseModel:
    """One case model from one per chip (each traced as its chip): the first chip's case
    and call figures, every chip's own ``chips`` entry. A kernel that traces differently
    per chip says so; a chip whose trace is not modelled makes the case not modelled."""
    first = models[0]
    if not names:
        return first.model_copy(update={"model_ms": model_ms})
    for name, other in zip(names, models, strict=True):
        if other.status == "not_modelled":
            reason = f"{name}: {other.reason}" if len(names) > 1 else other.reason
            return CaseModel(status="not_modelled", reason=reason, model_ms=model_ms)
    chips = {k: v for m in models for k, v in m.chips.items()}
    notes = list(first.notes)
    same = [len(m.calls) == len(first.calls) for m in models]
    calls = [c.model_copy(deep=True) for c in first.calls]
    for model, alike in zip(models[1:], same[1:], strict=True):
        if alike:
            for mine, theirs in zip(calls, model.calls, strict=True):
                mine.chips.update(theirs.chips)
    differ = [
        n
        for n, m, alike in zip(names, models, same, strict=True)
        if not alike
        or (m.hbm_bytes, m.grid_steps, m.flops) != (first.hbm_bytes, first.grid_steps, first.flops)
    ]
    if differ:
        notes.append(
            f"{TRACES_DIFFERENTLY}{', '.join(differ)}: bytes, steps and calls are "
            f"{names[0]}'s; each chip's time, bytes and steps are its own trace's"
        )
    not_modelled_ = list(dict.fromkeys(n for m in models for n in m.not_modelled))
    partial = f"partial model, no modelled time: {'; '.join(not_modelled_)}"
    return first.model_copy(
        update={
            "status": "partial" if not_modelled_ else "ok",
            "reason": partial if not_modelled_ else None,
            "chips": chips,
            "calls": calls,
            "notes": notes,
            "not_modelled": not_modelled_,
            "model_ms": model_ms,
        }
    )
