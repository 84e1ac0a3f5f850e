"""A kernel body's manual copies (``dma_start``/``dma_wait``): the bytes one moves, the
semaphore that pairs a start with its wait, and copies whose size is read at run time
(emit_pipeline's edge blocks, ``ref[i, :n]``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ci_bench.measure.model.stepcost import StepCost

EDGE_NOTE = (
    "a copy of dynamic size (emit_pipeline's partial edge block) counted at its whole "
    "block: an upper bound"
)


def edge_bound(dst: Any, shape: tuple[Any, ...]) -> tuple[int, ...] | None:
    """A copy's shape with each dynamic slice size (an edge block ``ref[i, :n]``, n read at
    run time) bounded by the buffer's own dimension; None when the slices do not line up."""
    from jax._src.state.indexing import NDIndexer, Slice

    transforms = getattr(dst, "transforms", ())
    base = getattr(getattr(dst, "ref", None), "shape", None)
    if len(transforms) != 1 or not isinstance(transforms[0], NDIndexer) or base is None:
        return None
    dynamic = [
        k
        for k, index in enumerate(transforms[0].indices)
        if isinstance(index, Slice) and not isinstance(index.size, int)
    ]
    holes = [d for d, size in enumerate(shape) if not isinstance(size, int)]
    if len(dynamic) != len(holes):
        return None
    bounded = list(shape)
    for d, k in zip(holes, dynamic, strict=True):
        bounded[d] = int(base[k])
    return tuple(bounded)


def copy_shape(src: Any, dst: Any) -> tuple[tuple[int, ...] | None, bool]:
    """The shape a copy moves and whether it is a bound: a static side is exact; with both
    sides of dynamic size (``ref.at[pl.ds(0, n)]``), each side's slices are bounded by its
    own buffer and the tighter bound holds, since both sides move the same bytes (a VMEM
    tile's slice written into a slice of a large HBM array is bounded by the tile)."""
    shapes = [tuple(getattr(side, "shape", ()) or ()) for side in (src, dst)]
    for shape in shapes:
        if all(isinstance(d, int) for d in shape):  # a scalar's () is static too
            return shape, False
    bounds = [edge_bound(side, shape) for side, shape in zip((src, dst), shapes, strict=True)]
    found = [b for b in bounds if b is not None and len(b) == len(shapes[1])]
    if not found:
        return None, False
    return tuple(min(dims) for dims in zip(*found, strict=True)), True


def memory_space(aval: Any) -> str:
    """A ref's memory space, lower case ("default" when it names none)."""
    space = getattr(aval, "memory_space", None)
    if space is None and hasattr(aval, "ref"):
        space = getattr(aval.ref, "memory_space", None)
    return str(space).lower() if space is not None else "default"


def dma_cost(eqn: Any) -> StepCost:
    """The HBM bytes a ``dma_start`` moves (its destination's static size), by direction."""
    from jax._src.pallas.mosaic.primitives import _dma_unflatten

    src, dst, *_ = _dma_unflatten(eqn.params["tree"], [v.aval for v in eqn.invars])
    cost = StepCost()
    dtype = getattr(dst, "dtype", None)
    shape, bounded = copy_shape(src, dst)
    if bounded:
        cost.notes.append(EDGE_NOTE)
    if dtype is None or shape is None or not all(isinstance(d, int) for d in shape):
        cost.not_modelled.append("a manual DMA of dynamic size")
        return cost
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    src_hbm = any(s in memory_space(src) for s in ("any", "hbm"))
    dst_hbm = any(s in memory_space(dst) for s in ("any", "hbm"))
    if src_hbm and not dst_hbm:
        cost.dma_read_bytes = nbytes
    elif dst_hbm and not src_hbm:
        cost.dma_write_bytes = nbytes
    elif src_hbm and dst_hbm:
        cost.dma_read_bytes = cost.dma_write_bytes = nbytes
    cost.notes.append("manual DMAs counted at their static sizes")
    return cost


def semaphore(eqn: Any) -> tuple | None:
    """The semaphore a ``dma_start`` signals or a ``dma_wait`` waits on, as its atoms (the
    ref and its indices: a start and its wait share them); None when unreadable."""
    try:
        from jax._src.pallas.mosaic.primitives import _dma_tree_leaves, _dma_unflatten

        avals = [v.aval for v in eqn.invars]
        src, dst, sem, *_ = _dma_unflatten(eqn.params["tree"], avals)
        start = len(_dma_tree_leaves(src)) + len(_dma_tree_leaves(dst))
        count = len(_dma_tree_leaves(sem))
    except Exception:  # jax internals moved: no copy is taken as exposed
        return None
    atoms = eqn.invars[start : start + count]
    return tuple(("literal", a.val) if hasattr(a, "val") else a for a in atoms) or None


def outer_semaphore(key: tuple, inner: Any, operands: Any) -> tuple:
    """A branch's semaphore atoms as the body around it names them."""
    names = dict(zip(inner.invars, operands, strict=False))
    return tuple(names.get(a, a) if not isinstance(a, tuple) else a for a in key)
