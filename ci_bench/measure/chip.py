"""The TPU chip this process runs on, by jax's own name (``v5e``): tuned configs are per chip."""

from __future__ import annotations


def this_chip() -> str | None:
    """jax's name for the TPU this process runs on (``v5e``), or None off a TPU."""
    import jax

    if jax.default_backend() != "tpu":
        return None
    try:  # jax's own mapping (the one ci-bench's chip table uses); private, so guarded
        from jax._src.pallas.mosaic.tpu_info import chip_version_from_device_kind
    except ImportError:  # a jax without it: no chip known, so the default config
        return None

    version = chip_version_from_device_kind(jax.devices()[0].device_kind.strip())
    return None if version is None else str(version)
