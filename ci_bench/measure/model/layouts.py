"""Which of XLA's transposes around a kernel the chip's stored layouts make free (pure).

XLA:TPU stores an array the function takes or returns in the client's default layout, and
that is not always row-major: ``f32[4, 513, 513]`` is ``{2,0,1:T(4,128)}`` on a v5e (the
batch second minor, so no row is padded from 513 to 520), ``bf16[4, 8, 1024, 64]`` keeps its
sequence axis minor. A transpose whose result is such an input's bytes read row-major (or
an output's written) is a bitcast and moves nothing: matmul 0.9.0 swaps ``[B, M, K]`` to
``[M, B, K]`` for exactly that, and the chip compiled it with no copy. The copies XLA makes
where a kernel takes such an array as it is are not counted: XLA stages them in VMEM, where
their read replaces the kernel's own (docs/MODEL.md, "Outside the kernels"). The layouts
come from the chip's client at the edge (``ci_bench.measure.chip.stored_layouts``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

# (shape, dtype name) -> the stored layout's major-to-minor dimension order; None: unknown.
Stored = Callable[[tuple[int, ...], str], tuple[int, ...] | None]


def parse_major_to_minor(printed: str) -> tuple[int, ...] | None:
    """The major-to-minor order of a layout as XLA prints it (``{2,0,1:T(4,128)}``: the
    braces list minor to major); None when it is not one."""
    found = re.match(r"\{\s*(\d+(?:\s*,\s*\d+)*)\s*(?::|\})", printed.strip())
    if not found:
        return None
    return tuple(int(d) for d in reversed(found.group(1).split(",")))


def _big(order: Sequence[int], shape: Sequence[int]) -> list[int]:
    """The order without unit dimensions, which can sit anywhere at no cost."""
    return [d for d in order if shape[d] != 1]


def read_as_bitcast(perm: Sequence[int], order: Sequence[int], shape: Sequence[int]) -> bool:
    """Whether ``transpose(x, perm)`` of an ``x`` stored in ``order`` is its bytes read
    row-major: the result's dimensions, major to minor, are ``x``'s stored order."""
    return _big(perm, shape) == _big(order, shape)


def written_as_bitcast(perm: Sequence[int], order: Sequence[int], shape: Sequence[int]) -> bool:
    """Whether ``transpose(x, perm)`` of a row-major ``x`` (``shape``: ``x``'s) stored in
    ``order`` (the result's) is a bitcast: the result's stored order walks ``x``'s
    dimensions major to minor."""
    walked = [perm[d] for d in order]
    return _big(walked, shape) == sorted(_big(walked, shape))
