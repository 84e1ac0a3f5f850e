"""A case modelled on GPUs (and the TPU chips beside them): each GPU traced as itself
(``asgpu``), its ``pallas_call``s walked on the GPU branch, modelled by ``gpu``."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.schema.model import CaseModel, not_modelled

# What jax's ``plgpu.kernel`` (and ``pl.core_map``) trace to: no block specs to read.
KERNEL_PRIMITIVES = ("mpmd_map", "core_map")
PLGPU_KERNEL = (
    "a Mosaic GPU kernel written with plgpu.kernel (its own copies and wgmma/tcgen05 MMAs, "
    "no block specs) is not read by the GPU model"
)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:400]


def gpu_model(
    spec: KernelSpec, case: Case, names: Sequence[str], seed: int, flops_factor: float
) -> CaseModel:
    """The case on the GPUs ``names``: the first GPU's calls and figures, every GPU's own
    ``chips`` entry from its own trace."""
    from ci_bench.measure.model import _spec_flops, trace
    from ci_bench.measure.model.asgpu import as_gpu
    from ci_bench.measure.model.extract import Scope, walk
    from ci_bench.measure.model.gpu import gpu_case_model
    from ci_bench.schema.gpus import gpu

    vector = getattr(spec, "compute_unit", "matrix") == "vector"
    spec_flops = _spec_flops(spec, case, seed)
    models = []
    for name in names:
        with as_gpu(name):
            closed, inputs = trace(spec, case, seed)
            walked = walk(closed.jaxpr, Scope(closed.jaxpr, closed.consts, inputs), "gpu")
        model = gpu_case_model(
            walked,
            [gpu(name)],
            spec_flops=spec_flops,
            flops_factor=flops_factor,
            check_flops=not vector,
        )
        if model.status == "not_modelled" and any(p in str(closed) for p in KERNEL_PRIMITIVES):
            model = not_modelled(PLGPU_KERNEL)
        models.append(model)
    first = models[0]
    for name, model in zip(names, models, strict=True):
        if model.status == "not_modelled":
            return not_modelled(f"{name}: {model.reason}" if len(names) > 1 else model.reason or "")
    chips = {k: v for m in models for k, v in m.chips.items()}
    missing = list(dict.fromkeys(n for m in models for n in m.not_modelled))
    return first.model_copy(
        update={
            "chips": chips,
            "not_modelled": missing,
            "status": "partial" if missing else "ok",
            "reason": f"partial model, no modelled time: {'; '.join(missing)}" if missing else None,
        }
    )


def with_gpus(
    spec: KernelSpec,
    case: Case,
    tpus: Sequence[str],
    gpus: Sequence[str],
    seed: int,
    flops_factor: float,
    clock: Callable[[], float] = time.perf_counter,
    analyze: Any = None,
) -> CaseModel:
    """The case on ``gpus`` alone, or (with ``tpus``) the TPU model with each GPU's entry
    beside its chips: the case's bytes, steps and calls are then the TPU trace's."""
    start = clock()
    try:
        on_gpus = gpu_model(spec, case, gpus, seed, flops_factor)
    except Exception as exc:  # the model never fails a case: its reason is recorded
        return not_modelled(_one_line(exc), (clock() - start) * 1000)
    if not tpus or on_gpus.status == "not_modelled":
        return on_gpus.model_copy(update={"model_ms": (clock() - start) * 1000})
    tpu = analyze(spec, case, tpus, seed=seed, flops_factor=flops_factor, clock=clock)
    if tpu.status == "not_modelled":
        return tpu
    missing = list(dict.fromkeys([*tpu.not_modelled, *(f"GPU: {n}" for n in on_gpus.not_modelled)]))
    note = "GPU entries (" + ", ".join(gpus) + "): the kernel's GPU branch, its own trace"
    return tpu.model_copy(
        update={
            "chips": {**tpu.chips, **on_gpus.chips},
            "not_modelled": missing,
            "status": "partial" if missing else "ok",
            "reason": f"partial model, no modelled time: {'; '.join(missing)}" if missing else None,
            "notes": [*tpu.notes, note],
            "model_ms": (clock() - start) * 1000,
        }
    )
