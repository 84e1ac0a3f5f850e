"""CPU interpret modes: each kernel's own choice, or jax's TPU interpreter for every call."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

InterpretMode = Literal["kernel", "tpu"]


def apply_interpret_mode(mode: InterpretMode) -> InterpretMode | None:
    """Set the process-wide Pallas interpret mode; the mode in force on CPU, None elsewhere.

    ``tpu`` runs every ``pallas_call`` traced from now on under jax's TPU interpreter
    (``jax.experimental.pallas.tpu.set_tpu_interpret_mode``), whatever its ``interpret``
    argument, so TPU-only kernels without one run unchanged on CPU. On a real accelerator
    nothing changes: kernels compile for it.
    """
    import jax

    if jax.default_backend() != "cpu":
        return None
    if mode == "tpu":
        from jax.experimental.pallas import tpu as pltpu

        pltpu.set_tpu_interpret_mode()
    else:
        reset_interpret_mode()  # an earlier in-process run's tpu mode must not linger
    return mode


def kernel_modes(
    kernels: Mapping[str, Any], default: str, forced: bool, tpu_kernels: Iterable[str]
) -> tuple[tuple[str, str], ...]:
    """Each kernel's CPU interpret mode where it is not ``default``: config
    ``cpu-interpret-tpu`` names it, else its SPEC's ``cpu_interpret``. ``forced`` (the
    ``--cpu-interpret`` flag) is one switch for every kernel: no exception."""
    if forced:
        return ()
    listed = set(tpu_kernels)
    modes = {}
    for name, spec in kernels.items():
        mode = "tpu" if name in listed else getattr(spec, "cpu_interpret", None) or default
        if mode != default:
            modes[name] = mode
    return tuple(sorted(modes.items()))


def needs_tpu_interpreter(spec: Any, seed: int = 42) -> bool:
    """Whether the kernel runs on a CPU only under jax's TPU interpreter (a TPU-only Pallas
    kernel with no ``interpret`` argument): its first case lowered for the CPU says so,
    nothing is executed."""
    import jax

    from ci_bench.measure.failures import TPU_ONLY
    from ci_bench.measure.modes import case_workload

    profile = next(iter(spec.matrix), None)
    cases = spec.cases(profile) if profile is not None else []
    if not cases:
        return False
    reset_interpret_mode()
    try:
        work = case_workload(spec, cases[0], seed=seed)
        jax.export.export(jax.jit(work.fn), platforms=["cpu"])(*work.args)
    except Exception as exc:  # the lowering error is the answer, any other is not ours
        return TPU_ONLY in str(exc)
    return False


def reset_interpret_mode() -> None:
    """Back to each kernel's own ``interpret`` choice (jax has no public reset: this is
    what ``set_tpu_interpret_mode`` sets, at its default)."""
    import sys

    if "jax" not in sys.modules:
        return
    from jax._src import config as jax_config

    setting = getattr(jax_config, "pallas_tpu_interpret_mode_context_manager", None)
    if setting is not None:
        setting.set_global(None)
