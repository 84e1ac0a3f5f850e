"""Lower each case's Pallas callable for a platform this machine lacks (TPU, CUDA).

Interpret mode on CPU runs a kernel whose block shapes or ops cannot compile for TPU (a
lane dimension not a multiple of 128, a cumsum inside the kernel). ``jax.export`` for
``platforms=["tpu"]`` runs the real Pallas -> Mosaic lowering in Python on a CPU-only
machine and raises exactly those errors, so a pull request learns of them before the TPU
runner does. Nothing is executed: the inputs are shapes (the SPEC's ``input_specs``, or
``jax.eval_shape`` of ``make_inputs``), and a backward case exports its backward call alone
(``ci_bench.measure.modes``), so the backward kernels are the ones checked.

A TPU case is lowered *as each target chip* (``model.aschip``): jax's chip queries during
tracing and lowering (``emit_pipeline``'s tiling, Mosaic's ``sign`` rule) answer for that
chip instead of failing on this machine's CPU. A failure that still comes from the machine
rather than the kernel (``HOST_FAILURES``: a device kind, a missing backend or plugin) is a
``host_error``: reported, never a red check on a pull request.
"""

from __future__ import annotations

import importlib.util
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax

from ci_bench.contract.spec import MODES, Case, KernelSpec
from ci_bench.errors import InputError
from ci_bench.measure.failures import full_traceback, one_line
from ci_bench.measure.modes import case_workload
from ci_bench.schema import CaseResult
from ci_bench.schema.lowering import ChipLowering, LoweredCase, LoweringPlatform

Clock = Callable[[], float]

# custom-call target -> the Pallas backend it means.
PALLAS_TARGETS = {
    "tpu_custom_call": "mosaic",
    "__gpu$xla.gpu.triton": "triton",
    "triton_kernel_call": "triton",
    "mosaic_gpu": "mosaic_gpu",
    "mosaic_gpu_v2": "mosaic_gpu",
}
_CUSTOM_CALL = re.compile(r"custom_call\s*@([\w.$-]+)|call_target_name\s*=\s*\"([^\"]+)\"")
CUDA_PLUGINS = ("jax_cuda13_plugin", "jax_cuda12_plugin")
# jax's messages for a failure of this machine, not of the kernel (one regex each).
HOST_FAILURES = (
    r"Unsupported TPU device kind",
    r"current device is (?:cpu|gpu|cuda|rocm)\b",
    r"Unable to initialize backend",
    r"[Bb]ackend '?\w+'? (?:failed to initialize|is not available)",
    r"jax_cuda\d*_plugin",
)
_HOST = re.compile("|".join(HOST_FAILURES))
NO_PALLAS_CALL = (
    "no Pallas custom call in the exported module: the callable ran Pallas in interpret "
    "mode (or has no pallas_call); see docs/KERNEL_CONTRACT.md, 'Lowering'"
)


def check_platform(platform: str) -> LoweringPlatform:
    """The platform if this jax can lower Pallas for it; else a one-line InputError."""
    if platform == "tpu":
        return "tpu"  # Mosaic's lowering ships in every jaxlib
    if platform == "cuda":
        if not any(importlib.util.find_spec(name) for name in CUDA_PLUGINS):
            raise InputError(
                "--platform cuda needs jax's CUDA plugin (pip install 'jax[cuda12]'), "
                "which is not installed here"
            )
        return "cuda"
    raise InputError(f"--platform wants tpu or cuda, got {platform!r}")


def custom_calls(mlir_text: str) -> list[str]:
    """Custom-call targets in an exported StableHLO module, each once, in order."""
    found = (a or b for a, b in _CUSTOM_CALL.findall(mlir_text))
    return list(dict.fromkeys(found))


def pallas_kind(targets: Sequence[str]) -> str | None:
    """The Pallas backend the targets show (mosaic, triton, mosaic_gpu), or None."""
    kinds = [PALLAS_TARGETS[t] for t in targets if t in PALLAS_TARGETS]
    return kinds[0] if kinds else None


def is_host_failure(message: str) -> bool:
    """Whether jax's message blames this machine (its device, backend, plugins), not the
    kernel."""
    return _HOST.search(message) is not None


def lower_case(
    spec: KernelSpec,
    case: Case,
    platform: LoweringPlatform,
    seed: int = 42,
    clock: Clock = time.perf_counter,
    chip: str | None = None,
) -> LoweredCase:
    """Export what the case times for its subject (``spec.pallas`` unless the SPEC names
    another) in the case's mode, for ``platform``, on abstract inputs, traced and lowered as
    TPU ``chip`` when given; failures become errors (``host_error`` when the machine is to
    blame)."""
    from ci_bench.measure.model.aschip import as_chip

    identity = {
        "id": case.id,
        "kernel": spec.name,
        "version": spec.version,
        "params": dict(case.params),
        "dtype": case.dtype,
        "platform": platform,
    }
    start = clock()
    try:
        with as_chip(chip if platform == "tpu" else None):
            work = case_workload(spec, case, seed=seed)
            exported = jax.export.export(jax.jit(work.fn), platforms=[platform])(*work.args)
            targets = custom_calls(exported.mlir_module())
    except Exception as exc:  # jax's lowering error is the finding: recorded, never raised
        message = one_line(exc)
        status = "host_error" if is_host_failure(message) else "error"
        where = f"{platform} as {chip}" if chip else platform
        return LoweredCase(
            **identity,
            status=status,
            error=f"lowering for {where} failed: {message}",
            traceback=full_traceback(exc),
            lower_ms=(clock() - start) * 1000,
        )
    elapsed = (clock() - start) * 1000
    kind = pallas_kind(targets)
    if kind is None:
        return LoweredCase(
            **identity, status="error", error=NO_PALLAS_CALL, custom_calls=targets, lower_ms=elapsed
        )
    return LoweredCase(**identity, status="ok", kind=kind, custom_calls=targets, lower_ms=elapsed)


def lower_for_chips(
    spec: KernelSpec,
    case: Case,
    platform: LoweringPlatform,
    chips: Sequence[str],
    seed: int = 42,
    clock: Clock = time.perf_counter,
) -> LoweredCase:
    """The case lowered as every chip in ``chips`` (TPU; none: as this machine), one row:
    an error if any chip's lowering is the kernel's fault, else a host error if any is the
    machine's, else ok. ``chips`` holds each chip's own outcome."""
    if platform != "tpu" or not chips:
        return lower_case(spec, case, platform, seed, clock)
    each = {name: lower_case(spec, case, platform, seed, clock, chip=name) for name in chips}
    per = {
        name: ChipLowering(
            status=c.status,
            kind=c.kind,
            custom_calls=c.custom_calls,
            error=c.error,
            lower_ms=c.lower_ms,
        )
        for name, c in each.items()
    }
    worst = next(
        (c for status in ("error", "host_error") for c in each.values() if c.status == status),
        next(iter(each.values())),
    )
    total = sum(c.lower_ms or 0 for c in each.values())
    return worst.model_copy(update={"chips": per, "lower_ms": total})


def as_case_error(lowered: LoweredCase) -> CaseResult | None:
    """``run --lower``: a failed lowering as the case's error result (not measured)."""
    if lowered.status != "error":
        return None  # ok, or the machine's fault (host_error): never the case's error
    return CaseResult(
        id=lowered.id,
        kernel=lowered.kernel,
        version=lowered.version,
        params=lowered.params,
        shape=list(lowered.params.values()),
        dtype=lowered.dtype,
        mode=_mode_of(lowered.id),
        status="error",
        error=lowered.error,
        traceback=lowered.traceback,
    )


def _mode_of(case_id: str) -> Any:
    last = case_id.rsplit("/", 1)[-1]
    return last if last in MODES else "forward"
