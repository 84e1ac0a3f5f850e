"""What the XLA operations around a case's kernels move through HBM (pure, over a jaxpr).

A case times its whole function: the ``pallas_call`` kernels and the XLA operations between
and around them (a layout transpose of q, k and v before an attention kernel, the partial
sums it leaves to reduce, a cast back). Those run one after another with the kernels, and
what they do is mostly move memory. How XLA fuses them is its own choice; the model assumes
the most it could do, *perfect fusion*: every array crossing the boundary between XLA
operations and the rest (the function's inputs and outputs, a kernel's operands and
results, a loop's) is read or written once, and everything computed between XLA operations
stays on chip. That is a lower bound on their traffic, never an estimate above it.

Views cost nothing (``reshape``, ``squeeze``, ``expand_dims``, a ``broadcast_in_dim`` that
only adds unit dimensions, a cast to its own type): XLA lays them out as the array they
view, and scalars are a register's. A ``platform_dependent`` conditional runs its TPU
branch; any other control-flow or primitive holding sub-jaxprs (``cond``, ``scan``,
``while``, ``shard_map``) is a boundary whose inside is not counted here. Work is not
counted either: a matmul left to XLA is bounded by its bytes alone (docs/MODEL.md, "Outside
the kernels").

Given the chip's stored layouts (``layouts``), the function's own inputs and outputs are
read in them: a transpose that reads one's bytes row-major (or writes an output's) is a
bitcast, free.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ci_bench.measure.model.extract import _CALLS, _CUSTOM, _branch_for, called
from ci_bench.measure.model.layouts import Stored, read_as_bitcast, written_as_bitcast

_VIEWS = {"reshape", "squeeze", "expand_dims", "copy", "copy_p", "stop_gradient"}
# Reads of part of an array: what they take out is what moves (x[0, 0] reads 4 bytes).
_SLICES = {"slice", "dynamic_slice", "gather"}
# Primitives whose sub-jaxpr is where the work is: the walk goes into them.
_INTO = set(_CALLS) | set(_CUSTOM)


def _bytes(atom: Any) -> int:
    """An array's bytes; 0 for a ref or a scalar (a register's, not HBM traffic)."""
    aval = getattr(atom, "aval", None)
    shape, dtype = getattr(aval, "shape", None), getattr(aval, "dtype", None)
    if not shape or dtype is None or "Ref" in type(aval).__name__:
        return 0
    return math.prod(shape) * np.dtype(dtype).itemsize


def _is_view(eqn: Any) -> bool:
    name = eqn.primitive.name
    if name in _VIEWS:
        return True
    if name == "convert_element_type" and eqn.invars:
        return eqn.invars[0].aval.dtype == eqn.outvars[0].aval.dtype  # same type: a no-op
    if name == "broadcast_in_dim" and eqn.invars:
        return _bytes(eqn.invars[0]) == _bytes(eqn.outvars[0])  # unit dims only
    return False


def _sub(eqn: Any) -> tuple[Any, list[Any]] | None:
    """The jaxpr a call-like primitive runs and the operands it binds (None: not one); a
    ``platform_dependent`` conditional runs its TPU branch (as ``extract.walk`` does)."""
    platforms = eqn.params.get("branches_platforms")
    if eqn.primitive.name == "cond" and platforms is not None:
        index = _branch_for(platforms, "tpu")
        if index is None:
            return None
        return eqn.params["branches"][index].jaxpr, list(eqn.invars[1:])
    if eqn.primitive.name not in _INTO:
        return None
    try:
        inner, _ = called(eqn.params)
    except StopIteration:  # a call primitive whose body this jax keeps elsewhere: a boundary
        return None
    return (inner, list(eqn.invars)) if hasattr(inner, "eqns") else None


class _Flow:
    """Every equation of the case, calls inlined, each variable named by the array it is."""

    def __init__(self) -> None:
        self.same: dict[Any, Any] = {}  # a variable -> the array it names (views, calls)
        self.eqns: list[tuple[bool, list[Any], Any]] = []  # (an XLA operation?, ins, eqn)

    def name(self, atom: Any) -> Any:
        while atom in self.same:
            atom = self.same[atom]
        return atom

    def inline(self, jaxpr: Any) -> None:
        for eqn in jaxpr.eqns:
            found = _sub(eqn)
            inner, operands = found if found is not None else (None, [])
            if inner is not None and len(inner.invars) == len(operands):
                for mine, theirs in zip(inner.invars, operands, strict=True):
                    if not hasattr(theirs, "val"):
                        self.same[mine] = self.name(theirs)
                self.inline(inner)
                for mine, theirs in zip(eqn.outvars, inner.outvars, strict=True):
                    if not hasattr(theirs, "val"):
                        self.same[mine] = self.name(theirs)
                continue
            ins = [self.name(v) for v in eqn.invars if not hasattr(v, "val")]
            if _is_view(eqn) and len(ins) == 1:
                self.same[eqn.outvars[0]] = ins[0]
                continue
            self.eqns.append((_is_xla(eqn), ins, eqn))


def _is_xla(eqn: Any) -> bool:
    """An XLA operation (counted), not a kernel or another boundary."""
    from jax.extend import core as jcore

    if eqn.primitive.name == "pallas_call":
        return False
    return not list(jcore.jaxprs_in_params(eqn.params))


def _order(var: Any, stored: Stored) -> tuple[int, ...] | None:
    """The stored major-to-minor order of an array the function takes or returns."""
    aval = var.aval
    order = stored(tuple(aval.shape), np.dtype(aval.dtype).name)
    return order if order is not None and len(order) == len(aval.shape) else None


def _free_transpose(
    eqn: Any, ins: list[Any], ends: tuple[set[Any], set[Any]], stored: Stored
) -> bool:
    """Whether an XLA transpose is a bitcast of a function input or output's stored bytes."""
    if eqn.primitive.name != "transpose" or len(ins) != 1:
        return False
    entries, exits = ends
    perm, shape = eqn.params["permutation"], eqn.invars[0].aval.shape
    source = ins[0]
    if source in entries and tuple(source.aval.shape) == tuple(shape):
        order = _order(source, stored)
        if order is not None and read_as_bitcast(perm, order, shape):
            return True
    if eqn.outvars[0] in exits:
        order = _order(eqn.outvars[0], stored)
        return order is not None and written_as_bitcast(perm, order, shape)
    return False


def outside_bytes(jaxpr: Any, layouts: Stored | None = None) -> int:
    """HBM bytes the XLA operations of ``jaxpr`` (a case's function) move under perfect
    fusion: each array they read from outside (an input, a kernel's or a loop's result)
    once (a slice of it: the slice), each array they make for outside (a kernel's or a
    loop's operand, an output) once. 0 when the function is its kernels alone. With the
    chip's stored ``layouts`` (None: every input and output row-major), a transpose that is
    a bitcast of an input's or output's stored bytes moves nothing."""
    flow = _Flow()
    flow.inline(jaxpr)
    eqns = flow.eqns
    if layouts is not None:  # the stored layouts' bitcasts dropped; XLA's copies to and from
        # them stay uncounted: staged in VMEM, their reads replace the kernel's own (MODEL.md)
        ends = (
            {flow.name(v) for v in jaxpr.invars},
            {flow.name(v) for v in jaxpr.outvars if not hasattr(v, "val")},
        )
        eqns = [e for e in eqns if not (e[0] and _free_transpose(e[2], e[1], ends, layouts))]
    made_by_xla = {out for xla, _, eqn in eqns if xla for out in eqn.outvars}
    read: dict[Any, int] = {}  # an array from outside -> the bytes XLA reads of it
    written: set[Any] = set()
    for xla, ins, eqn in eqns:
        for var in ins:
            if xla and var not in made_by_xla:
                part = eqn.primitive.name in _SLICES and var is ins[0]
                charge = sum(_bytes(o) for o in eqn.outvars) if part else _bytes(var)
                read[var] = max(read.get(var, 0), min(charge, _bytes(var)))
            elif not xla and var in made_by_xla:
                written.add(var)
    for out in jaxpr.outvars:
        if not hasattr(out, "val") and flow.name(out) in made_by_xla:
            written.add(flow.name(out))
    return sum(read.values()) + sum(_bytes(v) for v in written)
