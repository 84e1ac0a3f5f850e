"""Which chips a command traces, lowers or models as: TPU chips and NVIDIA GPUs, one rule.

``--chip``, else config ``target-chips``, else this machine's accelerator (its TPU chip or
its GPU, when the tables know it), else every chip of the platform asked for (TPU chips
when none is). TPU names are jax's (``schema.chips``), GPU names ci-bench's
(``schema.gpus``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ci_bench.errors import InputError
from ci_bench.schema.chips import CHIP_NAMES, TARGET_NAMES
from ci_bench.schema.gpus import GPU_NAMES, gpu_for_device_kind


def host_target() -> str | None:
    """This machine's TPU chip or GPU by its table name; None on a CPU or an unknown one."""
    import jax

    backend = jax.default_backend()
    if backend == "tpu":
        from ci_bench.measure.model.chips import chip_for_device_kind

        return chip_for_device_kind(jax.devices()[0].device_kind)
    if backend == "gpu":
        return gpu_for_device_kind(jax.devices()[0].device_kind)
    return None


def resolve_targets(
    given: Sequence[str], configured: Sequence[str], platform: str | None = None
) -> list[str]:
    """The targets (``platform`` "tpu" or "cuda": of that platform only, the config's
    others left out); an unknown ``--chip`` is a one-line InputError."""
    unknown = [c for c in given if c not in TARGET_NAMES]
    if unknown:
        raise InputError(
            f"--chip: unknown chip(s) {', '.join(unknown)}; TPU chips: {', '.join(CHIP_NAMES)}; "
            f"GPUs: {', '.join(GPU_NAMES)}"
        )
    names = {"tpu": CHIP_NAMES, "cuda": GPU_NAMES}.get(platform or "", TARGET_NAMES)
    if given and (wrong := [c for c in given if c not in names]):
        raise InputError(
            f"--chip {', '.join(wrong)}: not a chip of --platform {platform} "
            f"(its chips: {', '.join(names)})"
        )
    chosen = [c for c in (given or configured) if c in names]
    if chosen:
        return list(dict.fromkeys(chosen))
    here = host_target()
    if here in names:
        return [here]  # type: ignore[list-item]
    return list(GPU_NAMES if platform == "cuda" else CHIP_NAMES)
