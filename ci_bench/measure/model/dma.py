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
