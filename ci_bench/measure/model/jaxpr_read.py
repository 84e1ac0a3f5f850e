"""What a jaxpr equation says about shapes and loops, read alone: an array's VMEM layout,
a dot's dimensions, a ``fori_loop``'s trip count, the sub-jaxprs an equation holds. Used by
the step cost (body.py), the VMEM count (temporaries.py, pipeline.py) and the walkers."""

from __future__ import annotations

import math
from typing import Any


def padded_bytes(shape: tuple[int, ...], itemsize: int) -> int:
    """Bytes of an array as laid out in VMEM: the last two dims padded to the native tile
    (8 rows of 32-bit words, so 16 for 16-bit types; 128 lanes)."""
    if not shape:
        shape = (1, 1)
    elif len(shape) == 1:
        shape = (1, shape[0])
    rows = 8 * max(1, 4 // max(itemsize, 1))
    *lead, r, c = shape
    return math.prod(lead) * (-(-r // rows) * rows) * (-(-c // 128) * 128) * itemsize


def dot_dims(eqn: Any) -> tuple[int, int, int, int]:
    """(batch, m, k, n) of a ``dot_general``: its operands' free and contracted sizes."""
    (contract_lhs, contract_rhs), (batch_lhs, batch_rhs) = eqn.params["dimension_numbers"]
    lhs, rhs = (v.aval.shape for v in eqn.invars[:2])
    batch = math.prod(lhs[d] for d in batch_lhs)
    k = math.prod(lhs[d] for d in contract_lhs)
    m = math.prod(s for d, s in enumerate(lhs) if d not in (*contract_lhs, *batch_lhs))
    n = math.prod(s for d, s in enumerate(rhs) if d not in (*contract_rhs, *batch_rhs))
    return batch, m, k, n


def fori_trip_count(eqn: Any) -> int | None:
    """A ``while`` from ``fori_loop(lo, hi, ...)`` with literal bounds: hi - lo; else None."""
    from jax.extend import core as jcore

    cond = eqn.params["cond_jaxpr"].jaxpr
    body_consts = eqn.params["body_nconsts"]
    cond_consts = eqn.params["cond_nconsts"]
    if len(cond.eqns) != 1 or cond.eqns[0].primitive.name != "lt":
        return None
    lhs, rhs = cond.eqns[0].invars
    carries = eqn.invars[cond_consts + body_consts :]
    inner = cond.invars[cond_consts:]
    if lhs not in inner or (not isinstance(rhs, jcore.Literal) and rhs not in inner):
        return None
    start = carries[inner.index(lhs)]
    stop = rhs if isinstance(rhs, jcore.Literal) else carries[inner.index(rhs)]
    if not (isinstance(start, jcore.Literal) and isinstance(stop, jcore.Literal)):
        return None
    return max(int(stop.val) - int(start.val), 0)


def sub_jaxprs(eqn: Any) -> list[Any]:
    from jax.extend import core as jcore

    return [j.jaxpr if hasattr(j, "jaxpr") else j for j in jcore.jaxprs_in_params(eqn.params)]
