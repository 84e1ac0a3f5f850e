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
chip instead of failing on this machine's CPU. A CUDA case is lowered as each target GPU
(``model.asgpu``: compute capability, SM count) through Triton or Mosaic GPU, whichever the
kernel chose (its compiler params; jax's default otherwise), with no CUDA plugin: both
lowerings are Python in jaxlib (Mosaic GPU imports ``absl``). ``jax.export`` refuses
Triton's custom call, whose target has no compatibility guarantee; the check never
serialises, so that target is allowed. A failure names the rule it broke
(``lowering_rules``). A failure that still comes from the machine rather than the kernel
(``HOST_FAILURES``: a device kind, a missing backend or plugin) is a ``host_error``:
reported, never a red check on a pull request.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax

from ci_bench.contract.spec import MODES, Case, KernelSpec
from ci_bench.errors import InputError
from ci_bench.measure.failures import full_traceback, one_line
from ci_bench.measure.lowering_rules import host_reason, named
from ci_bench.measure.modes import case_workload
from ci_bench.schema import CaseResult
from ci_bench.schema.gpus import GPU_NAMES
from ci_bench.schema.lowering import ChipLowering, LoweredCase, LoweringPlatform
from ci_bench.schema.platforms import LOWERING_NAMES

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
# Pallas custom calls jax.export refuses (no compatibility guarantee): allowed for the
# check, which never serialises what it exports.
UNSTABLE_TARGETS = ("__gpu$xla.gpu.triton", "triton_kernel_call")
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
    """The platform if ci-bench lowers Pallas for it (the platform table's lowering names:
    Mosaic for TPU, Triton and Mosaic GPU for CUDA, all inside every jaxlib, no plugin);
    else a one-line InputError."""
    if platform in LOWERING_NAMES:
        return platform  # type: ignore[return-value]
    raise InputError(f"--platform wants {' or '.join(LOWERING_NAMES)}, got {platform!r}")


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


def _as_target(platform: LoweringPlatform, chip: str | None) -> Any:
    """The context that makes jax's chip queries answer for ``chip`` on ``platform``."""
    from ci_bench.measure.model.aschip import as_chip
    from ci_bench.measure.model.asgpu import as_gpu

    return as_gpu(chip) if platform == "cuda" else as_chip(chip)


def export_for(fn: Callable[..., Any], args: Sequence[Any], platform: LoweringPlatform) -> Any:
    """``jax.export`` of ``fn`` for ``platform``, Triton's custom call allowed (the check
    never serialises the module, so its missing compatibility guarantee does not matter)."""
    checks = [jax.export.DisabledSafetyCheck.custom_call(t) for t in UNSTABLE_TARGETS]
    return jax.export.export(jax.jit(fn), platforms=[platform], disabled_checks=checks)(*args)


def _failure(exc: Exception, platform: LoweringPlatform) -> tuple[str, str | None, str]:
    """(status, rule, message) of a failed export: the rule named from jax's message, and
    ``host_error`` when the machine rather than the kernel is to blame."""
    text = full_traceback(exc)
    rule, message = named(one_line(exc))
    if rule is None and (why := host_reason(text)) is not None:
        return "host_error", None, f"{one_line(exc)}: {why}"
    if is_host_failure(message):
        return "host_error", rule, message
    if platform == "cuda" and "Cannot lower pallas_call on platform: gpu" in message:
        if not _mosaic_gpu_importable():
            why = "jax's Mosaic GPU lowering cannot be imported here (pip install absl-py)"
            return "host_error", None, f"{message} ({why})"
        message += (
            " (no GPU lowering for the kernel's compiler params: params of another "
            "platform, e.g. TPU's, pick no GPU backend)"
        )
    return "error", rule, message


def _mosaic_gpu_importable() -> bool:
    try:
        from jax._src.pallas.mosaic_gpu import pallas_call_registration  # noqa: F401
    except ImportError:
        return False
    return True


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
    TPU chip or GPU ``chip`` when given; failures become errors naming the rule broken
    (``host_error`` when the machine is to blame)."""
    identity = {
        "id": case.id,
        "kernel": spec.name,
        "version": spec.version,
        "params": dict(case.params),
        "dtype": case.dtype,
        "platform": platform,
    }
    if platform == "cuda" and chip is None and jax.default_backend() != "gpu":
        # No GPU here to answer jax's queries (jax 0.11's Triton lowering refuses to guess):
        # lowered as the table's first GPU, and the error says so.
        chip = GPU_NAMES[0]
    start = clock()
    try:
        with _as_target(platform, chip):
            work = case_workload(spec, case, seed=seed)
            exported = export_for(work.fn, work.args, platform)
            targets = custom_calls(exported.mlir_module())
    except Exception as exc:  # jax's lowering error is the finding: recorded, never raised
        status, rule, message = _failure(exc, platform)
        where = f"{platform} as {chip}" if chip else platform
        return LoweredCase(
            **identity,
            status=status,  # type: ignore[arg-type]
            rule=rule,  # type: ignore[arg-type]
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
    """The case lowered as every chip in ``chips`` (TPU chips, or GPUs for CUDA; none: as
    this machine), one row: an error if any chip's lowering is the kernel's fault, else a
    host error if any is the machine's, else ok. ``chips`` holds each chip's own outcome."""
    if not chips:
        return lower_case(spec, case, platform, seed, clock)
    each = {name: lower_case(spec, case, platform, seed, clock, chip=name) for name in chips}
    per = {
        name: ChipLowering(
            status=c.status,
            kind=c.kind,
            custom_calls=c.custom_calls,
            error=c.error,
            rule=c.rule,
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
