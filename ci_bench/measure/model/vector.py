"""The vector and transcendental work of one kernel-body equation, in vreg operations.

A TPU TensorCore's vector unit works on vector registers (vregs) of 8 sublanes x 128 lanes
of 32-bit words (jax's chip table: ``num_sublanes``, ``num_lanes``); a 16-bit type packs
(16, 128) per vreg. Each elementwise equation over an array costs one VALU operation per
vreg of its result (the last two dims padded to the tile, as laid out in VMEM); the
transcendental functions (exp, exp2, log, tanh, rsqrt, sqrt, erf, pow...) are pushed to
the EUP, the extended unary pipeline, one push per vreg. Counted per equation:

- elementwise arithmetic, comparisons, selects, logic, casts and ``iota``: 1 VALU op per
  vreg (of the wider type for a cast; of the operands' type for a comparison);
- ``broadcast_in_dim``: 1 op per *distinct* vreg of the result (a lane- or
  sublane-replicated vreg is built once and reused); none when it only adds unit dims;
  ``tile`` (``pltpu.repeat``) likewise one op per vreg of its operand;
- transcendentals on the EUP (table ``_EUP``); a float division is an EUP reciprocal and a
  VALU multiply; ``logistic`` is Mosaic's ``1 / (1 + exp(-x))`` (its lowering rule);
- reductions (``reduce_sum/max/min``, ``argmax``): the input's vregs folded elementwise
  into one per output group (in - out vregs ops), then within a vreg log2(8) shuffle-and-
  combine steps over sublanes (jax's scaling book, "How to Think About TPUs", Appendix A:
  "shuffle by 4, 2, and 1 and do 3 pairs of elementwise sums") and log2(128) = 7 rotate-
  and-combine steps over lanes (cross-lane work goes through the XLU, "slow and fairly
  expensive": each step is charged one slot for the rotate and one for the combine, a
  documented model cost, not a measurement); cumulative ops (``cumsum``...) ceil(log2 n)
  shift-and-combine steps per vreg along their axis of length n.

A 16-bit operation packs (16, 128) per vreg only on chips whose VPU computes bf16 natively:
Mosaic's own table (``bf16_ops_min_supported_versions`` in
``xla/mosaic/dialect/tpu/transforms/canonicalize_mosaic.cc``) keeps add, sub, mul, max,
min, exp, exp2, log, tanh, pow in bf16 from TPU generation 6 (v6e, 7x) and widens them to
float32 below it; so each equation is counted both ways and the chip picks (``packed``).
Scalar equations (shape ``()``) run on the scalar core and cost nothing here; loads and
stores (``get``/``swap``) issue in their own VLIW slots and are not counted; transposes and
relayouts (XLU) are not counted (docs/MODEL.md, "What the model does not see").
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

LANES, SUBLANES = 128, 8
# One VALU op per result vreg.
_VPU = {
    "add", "sub", "mul", "max", "min", "neg", "abs", "select_n", "eq", "ne", "lt", "le",
    "gt", "ge", "and", "or", "not", "xor", "floor", "ceil", "round", "shift_left",
    "shift_right_logical", "shift_right_arithmetic", "convert_element_type", "iota",
    "square", "copy", "copy_p", "is_finite", "nextafter", "rem", "population_count",
    "clz", "bitcast_convert_type", "reduce_precision", "stop_gradient",
}  # fmt: skip
# (VALU ops, EUP pushes) per result vreg; sources in the module docstring.
_COMPOSITE = {
    "exp": (0, 1), "exp2": (0, 1), "log": (0, 1), "tanh": (0, 1), "rsqrt": (0, 1),
    "sqrt": (0, 1), "erf": (0, 1), "erfc": (1, 1), "erf_inv": (0, 1), "sin": (0, 1),
    "cos": (0, 1), "tan": (1, 2), "atan2": (2, 2), "log1p": (1, 1), "expm1": (1, 1),
    "logistic": (3, 2), "pow": (1, 2), "div": (1, 1), "clamp": (2, 0), "sign": (3, 0),
}  # fmt: skip
_REDUCE = {"reduce_sum": 1, "reduce_max": 1, "reduce_min": 1, "reduce_and": 1,
           "reduce_or": 1, "reduce_xor": 1, "reduce_prod": 1, "argmax": 3, "argmin": 3}  # fmt: skip
# Cumulative ops along an axis of length n: ceil(log2 n) shift-and-combine steps per vreg
# (a Hillis-Steele scan, two slots a step): a model cost, not a measurement.
_SCAN = {"cumsum", "cummax", "cummin", "cumprod", "cumlogsumexp"}
# Free: a view of the same vregs (or a scalar-core op).
_FREE = {"reshape", "squeeze", "expand_dims", "broadcast", "pjit", "program_id", "num_programs"}


def vregs(shape: tuple[int, ...], itemsize: int, packed: bool) -> int:
    """Vregs an array occupies: the last two dims padded to (8 x packing, 128)."""
    if not shape:
        return 1
    if len(shape) == 1:
        shape = (1, shape[0])
    rows = SUBLANES * (2 if packed and itemsize == 2 else 1)
    *lead, r, c = shape
    return math.prod(lead) * -(-r // rows) * -(-c // LANES)


def _itemsize(aval: Any) -> int:
    dtype = getattr(aval, "dtype", None)
    return np.dtype(dtype).itemsize if dtype is not None else 4


def _is_array(atom: Any) -> bool:
    aval = getattr(atom, "aval", None)
    return aval is not None and "Ref" not in type(aval).__name__ and hasattr(aval, "shape")


def _reduce(eqn: Any, packed: bool, per_fold: int) -> float:
    (x,) = eqn.invars[:1]
    shape = tuple(x.aval.shape)
    axes = set(eqn.params.get("axes", ()))
    size = _itemsize(x.aval)
    size = 4 if size == 1 else size
    kept = tuple(1 if d in axes else n for d, n in enumerate(shape))
    padded = (1, *shape) if len(shape) == 1 else shape
    offset = len(padded) - len(shape)
    axes = {a + offset for a in axes}
    out = vregs(kept, size, packed)
    ops = (vregs(shape, size, packed) - out) * per_fold
    rows = SUBLANES * (2 if packed and size == 2 else 1)
    if len(padded) - 2 in axes and padded[-2] > 1:
        ops += out * 2 * int(math.log2(rows))
    if len(padded) - 1 in axes and padded[-1] > 1:
        ops += out * 2 * int(math.log2(LANES))
    return float(ops)


def _broadcast(eqn: Any, packed: bool) -> float:
    out = tuple(eqn.outvars[0].aval.shape)
    kept = [1] * len(out)
    operand = tuple(eqn.invars[0].aval.shape)
    if math.prod(out) == math.prod(operand):
        return 0.0  # a reshape: nothing is replicated
    for src, dst in enumerate(eqn.params.get("broadcast_dimensions", ())):
        kept[dst] = operand[src]
    return float(vregs(tuple(kept), _itemsize(eqn.outvars[0].aval), packed))


def vector_ops(eqn: Any, packed: bool) -> tuple[float, float] | None:
    """(VALU ops, EUP pushes) of ``eqn`` in vregs, 16-bit types packed when ``packed``;
    (0, 0) for scalar, free or memory equations; None for a vector equation this table
    does not know (the caller notes it as not timed)."""
    name = eqn.primitive.name
    outs = [v for v in eqn.outvars if _is_array(v)]
    if name in _FREE or not outs or not any(np.shape(v.aval) for v in outs):
        return 0.0, 0.0
    if name in ("get", "swap", "masked_load", "masked_swap", "load", "dot_general"):
        return 0.0, 0.0
    out = outs[0].aval
    if name in ("eq", "ne", "lt", "le", "gt", "ge") and eqn.invars:
        size = _itemsize(eqn.invars[0].aval)
    elif name == "convert_element_type" and eqn.invars:
        size = max(_itemsize(eqn.invars[0].aval), _itemsize(out), 4)
    else:
        size = _itemsize(out)
    size = 4 if size == 1 else size  # masks and int8 are worked as 32-bit words
    n = float(vregs(tuple(out.shape), size, packed))
    if name in _VPU:
        cases = len(eqn.invars) - 2 if name == "select_n" else 1
        return n * max(cases, 1), 0.0
    if name == "integer_pow":
        return n * max(abs(int(eqn.params.get("y", 2))) - 1, 1), 0.0
    if name in _COMPOSITE:
        vpu, eup = _COMPOSITE[name]
        return n * vpu, n * eup
    if name in _REDUCE:
        return _reduce(eqn, packed, _REDUCE[name]), 0.0
    if name == "broadcast_in_dim":
        return _broadcast(eqn, packed), 0.0
    if name == "tile" and eqn.invars:  # pltpu.repeat: its distinct vregs are the operand's
        return float(vregs(tuple(eqn.invars[0].aval.shape), size, packed)), 0.0
    if name in _SCAN:
        length = tuple(out.shape)[int(eqn.params.get("axis", 0))]
        steps = 2 * math.ceil(math.log2(max(length, 2)))
        return n * steps, n * steps / 2 if name == "cumlogsumexp" else 0.0
    return None


def work(eqn: Any) -> tuple[float, float, float, float] | None:
    """(VALU ops, EUP pushes) with 16-bit types worked as 32-bit, then packed; None when
    the equation is a vector operation this table does not know."""
    wide, packed = vector_ops(eqn, False), vector_ops(eqn, True)
    if wide is None or packed is None:
        return None
    return (*wide, *packed)
