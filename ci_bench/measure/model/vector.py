"""The vector and transcendental work of one kernel-body equation, in vreg operations.

A TPU TensorCore's vector unit works on vector registers (vregs) of 8 sublanes x 128 lanes
of 32-bit words (jax's chip table: ``num_sublanes``, ``num_lanes``); a 16-bit type packs
(16, 128) per vreg. Each elementwise equation over an array costs VALU operations per vreg
of its result (the last two dims padded to the tile, as laid out in VMEM); the
transcendental functions are pushed to the EUP, the extended unary pipeline, one push per
vreg, and their results popped and finished on the VALU.

Since revision 10 the counts are the compiler's: libtpu compiling one operation on a
(256, 512) block for a v5e (``benchmarks/tpu_vector_ops.py``, deviceless: the final bundles'
VALU, EUP and XLU slots beyond a bare copy's, per float32 vreg;
``benchmarks/data/tpu_v5e_vector_ops_deviceless_2026-12-07.json``). Counted per equation:

- elementwise arithmetic, comparisons, selects, logic, casts and ``iota``: 1 VALU op per
  vreg (of the wider type for a cast; float32 to a 16-bit float packs two vregs into one:
  1 per packed vreg of its result, 0.5 per float32 one; other narrowing casts unmeasured);
- ``broadcast_in_dim``: 1 op per *distinct* vreg of the result (a sublane-replicated vreg is
  built once and reused); none when it only adds unit dims, nor when it replicates along
  lanes (a column broadcast: the XLU's work, 0.008 VALU and 1.16 XLU slots a vreg);
  ``tile`` (``pltpu.repeat``) one op per vreg of its operand;
- transcendentals (table ``_COMPOSITE``: VALU, EUP per vreg): exp and log 2 + 1, exp2 and
  tanh 1 + 1; the exactly rounded float32 ones refine on the VALU: rsqrt 9 + 1, sqrt 12 + 1,
  division 14 + 1 (a reciprocal and its Newton steps), ``logistic`` 16 + 2 on a v5e; a v6e
  (``--chip v6e``: the chips with a bf16 VPU, ``_COMPOSITE_PACKED``) refines in fewer:
  rsqrt 1, sqrt 7, division 2, ``logistic`` 4; ops the microbenchmark does not cover keep
  the sources' counts (``erf``, ``sin``... one push);
- a 16-bit float operation on a chip whose VPU does not compute bf16 (v5e and older:
  Mosaic's ``bf16_ops_min_supported_versions`` in ``canonicalize_mosaic.cc`` widens it)
  unpacks each 16-bit operand (1 op per float32 vreg), computes in float32 and packs its
  result (0.5): 3.5 for an add, 3.5 for an exp (a scalar operand is splat, not unpacked);
  a 16-bit result needs no refinement step (``_COMPOSITE_16``: rsqrt 1, division 2,
  logistic 8.5); a select moves packed words (0.5);
- reductions (``reduce_sum/max/min``, ``argmax``): the input's vregs folded elementwise
  into one per output group (in - out vregs ops), then within a vreg log2(8) shuffle-and-
  combine steps over sublanes (2 slots each; the compiler's count for a row sum); the
  reduction across lanes runs on the XLU (1.5 XLU slots a float32 vreg of the input), not
  the VALU; cumulative ops (``cumsum``...) ceil(log2 n) shift-and-combine steps per vreg
  along their axis of length n (a model cost: Mosaic lowers none on a TensorCore).

A dot's own VALU work (the sum of its MXU passes over k) is counted with its FLOPs
(``body._accumulated``). Each equation is counted both ways, 16-bit types widened and
packed, and the chip picks
(``packed``: v6e and 7x compute bf16 natively, one op per packed vreg). Scalar equations
(shape ``()``) run on the scalar core and cost nothing here; loads and stores
(``get``/``swap``) issue in their own VLIW slots and are not counted; the XLU's work
(cross-lane reductions and broadcasts, transposes and relayouts) is not timed: no rate of it
is measured (docs/MODEL.md, "What the model does not see").
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
    "exp": (2, 1), "exp2": (1, 1), "log": (2, 1), "tanh": (1, 1), "rsqrt": (9, 1),
    "sqrt": (12, 1), "erf": (0, 1), "erfc": (1, 1), "erf_inv": (0, 1), "sin": (0, 1),
    "cos": (0, 1), "tan": (1, 2), "atan2": (2, 2), "log1p": (1, 1), "expm1": (1, 1),
    "logistic": (16, 2), "pow": (1, 2), "div": (14, 1), "clamp": (2, 0), "sign": (3, 0),
}  # fmt: skip
# The same computed at bf16 precision (a 16-bit result) on a chip without a bf16 VPU, where
# it needs no refinement step (v5e's compile).
_COMPOSITE_16 = {"rsqrt": (1, 1), "div": (2, 1), "logistic": (8.5, 2)}
# A chip with a bf16 VPU (v6e's compile, every float type; per packed vreg for 16-bit ones):
# its division, square roots and logistic refine with fewer VALU operations.
_COMPOSITE_PACKED = {"rsqrt": (1, 1), "sqrt": (7, 1), "div": (2, 1), "logistic": (4, 2)}
_FLOAT16 = ("bfloat16", "float16")
# Elementwise primitives whose 16-bit operands a chip without a bf16 VPU unpacks to float32.
_FLOAT_MATH = {"add", "sub", "mul", "max", "min", "neg", "abs", "square", "floor", "ceil",
               "round", "eq", "ne", "lt", "le", "gt", "ge", "integer_pow", *_COMPOSITE}  # fmt: skip
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
    if size == 2 and not packed:  # its 16-bit input unpacked first
        ops += vregs(shape, 4, False)
    return float(ops)  # the steps across lanes are the XLU's


def _broadcast(eqn: Any, packed: bool) -> float:
    out = tuple(eqn.outvars[0].aval.shape)
    kept = [1] * len(out)
    operand = tuple(eqn.invars[0].aval.shape)
    if math.prod(out) == math.prod(operand):
        return 0.0  # a reshape: nothing is replicated
    for src, dst in enumerate(eqn.params.get("broadcast_dimensions", ())):
        kept[dst] = operand[src]
    if out[-1] > 1 and kept[-1] == 1 and math.prod(kept) > 1:
        return 0.0  # a column replicated across lanes: the XLU's work (a splat is 1 op)
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
        if np.dtype(eqn.invars[0].aval.dtype).name == "float32" and _float16(out):
            return float(vregs(tuple(out.shape), 2, True)), 0.0  # packing as it narrows
        size = max(_itemsize(eqn.invars[0].aval), _itemsize(out), 4)
    else:
        size = _itemsize(out)
    size = 4 if size == 1 else size  # masks and int8 are worked as 32-bit words
    n = float(vregs(tuple(out.shape), size, packed))
    widened = not packed and size == 2  # 16-bit floats worked as float32 (no bf16 VPU)
    if name == "select_n" and widened:
        return n * 0.5 * max(len(eqn.invars) - 2, 1), 0.0  # packed words moved as they are
    if name in _FLOAT_MATH and not packed and _float16_operands(eqn):
        return _widened(name, eqn, n, size)
    table = _COMPOSITE_PACKED if packed else _COMPOSITE_16 if _float16(out) else None
    return _own(name, eqn, n, size, packed, table)


def _float16_operands(eqn: Any) -> int:
    """How many of ``eqn``'s array operands are 16-bit floats (a scalar operand, splat into
    the operation, is not unpacked vreg by vreg)."""
    return sum(_is_array(v) and bool(np.shape(v.aval)) and _float16(v.aval) for v in eqn.invars)


def _float16(aval: Any) -> bool:
    """A 16-bit float (bfloat16's numpy kind is "V", not "f": named)."""
    return np.dtype(aval.dtype).name in _FLOAT16


def _widened(name: str, eqn: Any, n: float, size: int) -> tuple[float, float] | None:
    """A 16-bit float operation on a chip without a bf16 VPU: each 16-bit operand unpacked
    (1 op per float32 vreg), the operation in float32 (at bf16 precision: ``_COMPOSITE_16``)
    and a 16-bit result packed (0.5)."""
    narrow = _float16(eqn.outvars[0].aval)
    own = _own(name, eqn, n, size, False, _COMPOSITE_16 if narrow else None)
    if own is None:
        return None
    unpack = n * _float16_operands(eqn)
    return own[0] + unpack + (n * 0.5 if narrow else 0.0), own[1]


def _own(
    name: str,
    eqn: Any,
    n: float,
    size: int,
    packed: bool,
    override: dict[str, tuple[float, int]] | None = None,
) -> tuple[float, float] | None:
    """The operation's own (VALU, EUP) over its ``n`` result vregs of ``size``-byte words."""
    out = next(v for v in eqn.outvars if _is_array(v)).aval
    if name in _VPU:
        cases = len(eqn.invars) - 2 if name == "select_n" else 1
        return n * max(cases, 1), 0.0
    if name == "integer_pow":
        return n * max(abs(int(eqn.params.get("y", 2))) - 1, 1), 0.0
    if name in _COMPOSITE:
        vpu, eup = (override or {}).get(name) or _COMPOSITE[name]
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
