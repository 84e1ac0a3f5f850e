"""Trace and lower *as an NVIDIA GPU* on any host: the one place ci-bench tells jax which GPU.

jax's GPU lowerings and jax's own GPU kernels ask for the GPU while they trace or lower:
Mosaic GPU for the compute capability (``mosaic/gpu/core.py``'s ``_infer_arch``, which
picks the instructions: ``wgmma`` on 9.0, ``tcgen05`` on 10.0), jax's Mosaic GPU matmuls
for the SM count (``hopper_matmul_mgpu.get_num_sms``: ``abstract_device.num_cores``). Both
read the *abstract mesh*'s ``abstract_device`` first, the seam the TPU path uses
(``aschip``), so nothing in jax is patched: a one-device abstract mesh whose device is the
target GPU is set for the duration of the trace or export. jax's ``AbstractDevice`` has no
compute capability, so the device set here is jax's class with the GPU's own attributes
added, under the names a real jax GPU device has (``compute_capability``, ``core_count``,
``shared_memory_per_block_optin``).

What this cannot answer (docs/LOWERING.md): Triton's lowering asks the runtime
(``jax.local_devices(backend="gpu")``) and, with no GPU here, lowers as compute capability
9.0, which only gates fp8 casts (all three GPUs pass); Mosaic GPU's shared-memory budget
reads the local device too and, with none, uses 227 KB, which is every table GPU's figure
(``schema.gpus``); the CUDA runtime version some kernels read (``cuda_versions``) exists
only with the CUDA plugin installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from ci_bench.schema.gpus import gpu

_AXIS = "ci_bench_gpu"


@cache
def _device_class() -> type:
    """jax's AbstractDevice with a real GPU device's attributes added (built on first use:
    jax is imported lazily)."""
    import dataclasses

    import jax

    base = jax.sharding.AbstractDevice

    @dataclasses.dataclass(frozen=True, slots=True)
    class GpuAbstractDevice(base):  # type: ignore[misc, valid-type]
        compute_capability: str = "9.0"
        core_count: int = 0
        shared_memory_per_block_optin: int = 0

    return GpuAbstractDevice


def abstract_gpu(name: str) -> Any:
    """The abstract device jax traces GPU ``name`` as."""
    target = gpu(name)
    return _device_class()(
        device_kind=target.device_kind,
        num_cores=target.sms,
        platform="gpu",
        compute_capability=target.compute_capability,
        core_count=target.sms,
        shared_memory_per_block_optin=target.smem_per_block_bytes,
    )


@contextmanager
def as_gpu(name: str | None) -> Iterator[None]:
    """jax's GPU queries answer for ``name`` inside the block (None: the host's device)."""
    if name is None:
        yield
        return
    import jax

    mesh = jax.sharding.AbstractMesh((1,), (_AXIS,), abstract_device=abstract_gpu(name))
    with jax.sharding.use_abstract_mesh(mesh):
        yield
