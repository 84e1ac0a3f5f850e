"""CPU interpret modes: each kernel's own choice, or jax's TPU interpreter for every call."""

from __future__ import annotations

from typing import Literal

InterpretMode = Literal["kernel", "tpu"]
INTERPRET_MODES: tuple[InterpretMode, ...] = ("kernel", "tpu")


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
