"""Index maps evaluated over a whole grid at once, in numpy.

An index map is a tiny integer jaxpr (``lambda i, j, k: (i, k)``). Evaluating it with
numpy over every grid step at once takes microseconds, where dispatching it through jax
takes tens of milliseconds per operand; primitives outside the small integer set below
(scalar-prefetch reads, anything exotic) return None and the caller uses jax instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """lax.div on integers: C division, rounding toward zero."""
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": _div,
    "rem": np.fmod,
    "max": np.maximum,
    "min": np.minimum,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "shift_left": np.left_shift,
    "shift_right_arithmetic": np.right_shift,
}
_UNARY: dict[str, Callable[[Any], Any]] = {
    "neg": np.negative,
    "sign": np.sign,
    "abs": np.abs,
    "not": np.invert,
}


def evaluate(jaxpr: Any, consts: Sequence[Any], args: Sequence[np.ndarray]) -> list | None:
    """The jaxpr's outputs for arrays of arguments (broadcast together); None when it uses
    a primitive this evaluator does not know."""
    from jax.extend import core as jcore

    env: dict[Any, Any] = {}

    def read(atom: Any) -> Any:
        return np.asarray(atom.val) if isinstance(atom, jcore.Literal) else env[atom]

    for var, value in zip(jaxpr.constvars, consts, strict=True):
        env[var] = np.asarray(value)
    for var, value in zip(jaxpr.invars, args, strict=True):
        env[var] = np.asarray(value)
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        ins = [read(v) for v in eqn.invars]
        if name in _BINARY:
            out = _BINARY[name](*ins)
        elif name in _UNARY:
            out = _UNARY[name](*ins)
        elif name == "convert_element_type":
            out = ins[0].astype(np.dtype(eqn.params["new_dtype"]))
        elif name == "select_n":
            out = np.choose(ins[0].astype(np.int64), ins[1:])
        elif name == "integer_pow":
            out = ins[0] ** eqn.params["y"]
        elif name == "clamp":
            out = np.clip(ins[1], ins[0], ins[2])
        elif name in ("jit", "pjit", "closed_call"):
            inner = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr")
            found = evaluate(inner.jaxpr, inner.consts, ins)
            if found is None:
                return None
            for var, value in zip(eqn.outvars, found, strict=True):
                env[var] = value
            continue
        else:
            return None
        env[eqn.outvars[0]] = out
    return [read(v) for v in jaxpr.outvars]
