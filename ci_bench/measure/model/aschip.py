"""Trace and lower *as a TPU chip* on any host: the one place ci-bench tells jax which chip.

jax asks for the TPU generation while it traces or lowers some kernels
(``tpu_info.get_tpu_info()`` in ``emit_pipeline``'s tiling, Mosaic's ``sign`` rule, kernels
that pick block sizes per chip). It answers from ``tpu_info.get_device_kind()``, which reads
the *abstract mesh*'s ``abstract_device`` when one is set and the default device otherwise;
on a CPU that is "cpu" and jax raises "Unsupported TPU device kind: cpu". jax's own public
seam for "trace for another device" is ``jax.sharding.use_abstract_mesh`` with an
``AbstractDevice`` (its docstring: "f will be traced and lowered for TPU platform"), so
nothing in jax is patched: a one-device abstract mesh whose device is the target chip is
set for the duration of the trace or export. jax caches chip queries with the trace
context in the key, so one chip's answer never leaks into another's trace.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ci_bench.schema.model import TPU_DEVICE_KINDS

MEGACORE = ("v4", "v5p")
_AXIS = "ci_bench_chip"


def device_kind(name: str) -> str:
    """jax's ``device_kind`` of chip ``name`` (the first of its spellings jax accepts)."""
    for kind, chip in TPU_DEVICE_KINDS.items():
        if chip == name:
            return kind
    raise ValueError(f"no TPU device kind for chip {name!r}")


def tensor_cores(name: str) -> int:
    """TensorCores in one jax device of the chip: 2 on megacore chips (v4, v5p), else 1."""
    return 2 if name in MEGACORE else 1


@contextmanager
def as_chip(name: str | None) -> Iterator[None]:
    """jax's chip queries answer for ``name`` inside the block (None: the host's device)."""
    if name is None:
        yield
        return
    import jax

    device = jax.sharding.AbstractDevice(
        device_kind=device_kind(name), num_cores=tensor_cores(name), platform="tpu"
    )
    mesh = jax.sharding.AbstractMesh((1,), (_AXIS,), abstract_device=device)
    with jax.sharding.use_abstract_mesh(mesh):
        yield
