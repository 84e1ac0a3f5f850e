"""Copies whose size is read at run time: emit_pipeline's edge blocks (``ref[i, :n]``)."""

from __future__ import annotations

from typing import Any

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
