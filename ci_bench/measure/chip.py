"""The TPU chip kernel code runs for, by jax's own name (``v5e``): tuned configs are per chip.

That is the chip this process runs on, except while ci-bench traces *as* a chip
(``ci_bench.measure.model.aschip.as_chip``: ``analyze``, ``lower`` and the model a run adds,
on any host): then it is that chip, read from the abstract mesh jax traces under, so a kernel
that reads its tuned config (``ci_bench.spec.tuned_config``) is modelled and lowered with the
config it would run with there, not the host's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

_answered_as_chip = 0  # how often this_chip() answered for a traced-as chip


def this_chip() -> str | None:
    """jax's name for the TPU kernel code runs for (``v5e``), or None off a TPU."""
    import jax

    traced_as = _traced_as()
    if traced_as is not None:
        global _answered_as_chip
        _answered_as_chip += 1
        return traced_as
    if jax.default_backend() != "tpu":
        return None
    try:  # jax's own mapping (the one ci-bench's chip table uses); private, so guarded
        from jax._src.pallas.mosaic.tpu_info import chip_version_from_device_kind
    except ImportError:  # a jax without it: no chip known, so the default config
        return None

    version = chip_version_from_device_kind(jax.devices()[0].device_kind.strip())
    return None if version is None else str(version)


def answered_as_chip() -> int:
    """How often ``this_chip`` answered for a chip traced as: the model traces each chip
    on its own when a kernel asked (``ci_bench.measure.model._traces``)."""
    return _answered_as_chip


def _traced_as() -> str | None:
    """The TPU chip of the abstract mesh jax is tracing under, if ci-bench set one."""
    import jax

    try:
        device = getattr(jax.sharding.get_abstract_mesh(), "abstract_device", None)
    except Exception:  # a jax without abstract meshes: nothing is traced as a chip
        return None
    if device is None or getattr(device, "platform", None) != "tpu":
        return None
    from ci_bench.schema.model import TPU_DEVICE_KINDS

    return TPU_DEVICE_KINDS.get(str(device.device_kind).strip())


def printed_layout(shape: tuple[int, ...], dtype: object) -> str | None:
    """The layout this process's TPU stores a new ``dtype[shape]`` array in, as XLA prints it
    (its client's default, ``{2,0,1:T(4,128)}``); None off a TPU or where it cannot tell. The
    one place that asks the chip: kernels choosing a path by it, and the cost model. Off a
    TPU, a worker told to answer for a chip without it (``measure.deviceless``) asks libtpu."""
    import jax
    import numpy as np

    if jax.default_backend() != "tpu":
        return _deviceless_printed(tuple(shape), np.dtype(dtype).name)
    return _client_printed(tuple(shape), np.dtype(dtype).name)


def stored_layouts() -> Callable[[tuple[int, ...], str], tuple[int, ...] | None] | None:
    """The layouts this process's TPU stores a new array in (its client's default, as a
    major-to-minor order), for the cost model's XLA operations; None off a TPU, where the
    model takes every input and output row-major (docs/MODEL.md, "Outside the kernels"),
    unless this process answers for a chip without it (``measure.deviceless``)."""
    import jax

    from ci_bench.measure import deviceless

    if jax.default_backend() != "tpu" and not deviceless.requested():
        return None
    return _stored_order


def _stored_order(shape: tuple[int, ...], dtype: str) -> tuple[int, ...] | None:
    """``printed_layout`` as a major-to-minor order (the chip's client's, or libtpu's)."""
    from ci_bench.measure.model.layouts import parse_major_to_minor

    printed = printed_layout(shape, dtype)
    return None if printed is None else parse_major_to_minor(printed)


@functools.cache
def _client_printed(shape: tuple[int, ...], dtype: str) -> str | None:
    """The chip client's default layout of ``dtype[shape]``; None when it cannot tell."""
    import jax
    import numpy as np

    device = jax.devices()[0]
    try:
        return str(device.client.get_default_layout(np.dtype(dtype), shape, device))
    except (AttributeError, TypeError, RuntimeError, ValueError):  # a jax that cannot tell
        return None


def _deviceless_printed(shape: tuple[int, ...], dtype: str) -> str | None:
    """The layout libtpu gives the chip this process answers for without it, or None when
    it answers for none (``measure.deviceless``)."""
    from ci_bench.measure import deviceless

    chip = deviceless.requested()
    return None if chip is None else deviceless.printed_layout(chip, shape, dtype)
