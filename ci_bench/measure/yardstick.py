"""What a kernel's cost models are checked against: like with like, from the native code.

A FLOPs model states the work a kernel does on its compute unit; XLA's total for the
native implementation counts more than that (conversions, elementwise work around the
dots, and on a CPU the bf16 -> f32 upcasts the backend inserts). So the yardstick is:

- ``compute_unit = "matrix"``: the native's dot FLOPs, 2 x output elements x contracted
  size of every ``dot_general`` in its jaxpr (what an MXU or tensor core executes; scans
  multiply by their length), the same figure the cost model reads from the Pallas grid;
- ``compute_unit = "vector"``: XLA's FLOPs of the native module as jax lowered it (before
  backend rewrites), less one per element each conversion produces.

A bytes model states ideal traffic (each array once). XLA's bytes-accessed of the native
sums every compiled op's operands and results, which is that ideal only when the native
compiles to one pass; ``passes`` says how many it compiled to.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import jax

# Ops of a compiled entry computation that move or compute nothing of their own.
_FREE_OPS = frozenset(
    {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "copy-start", "copy-done"}
)
_ENTRY_OP = re.compile(r"=\s*\S+(?:\s*\{[^}]*\})?\s+([a-z][\w-]*)\(")
# Primitives whose sub-jaxpr runs once per call with the caller's operands.
_OPAQUE = ("pallas_call",)


@dataclass(frozen=True)
class Yardstick:
    """The native implementation's figures a cost model is compared with."""

    dot_flops: int | None  # None where a loop's trip count is unknown (while)
    flops_without_conversions: float | None  # XLA's, None where it gave none
    conversions: int  # elements produced by conversions (counted once each by XLA)
    passes: int | None  # compute ops in the compiled entry computation
    loops: bool  # the native loops (XLA counts a body once)


def _size(aval: Any) -> int:
    return math.prod(getattr(aval, "shape", ()))


def _subjaxprs(params: dict[str, Any]) -> Iterator[Any]:
    from jax.extend.core import jaxprs_in_params

    yield from jaxprs_in_params(params)


@dataclass
class _Counts:
    dots: int = 0
    conversions: int = 0
    unknown_loop: bool = False
    loops: bool = False


def _walk(jaxpr: Any, times: int, counts: _Counts) -> None:
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "dot_general":
            (contracting, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval.shape
            contracted = math.prod(lhs[d] for d in contracting)
            counts.dots += 2 * _size(eqn.outvars[0].aval) * contracted * times
        elif name == "convert_element_type":
            counts.conversions += _size(eqn.outvars[0].aval) * times
        if name in _OPAQUE:
            counts.unknown_loop = True
            continue
        inner = times
        if name == "scan":
            counts.loops = True
            inner = times * int(eqn.params["length"])
        elif name == "while":
            counts.loops = counts.unknown_loop = True
        subs = list(_subjaxprs(eqn.params))
        if name == "cond":  # one branch runs: the costliest bounds it
            best: _Counts | None = None
            for sub in subs:
                branch = _Counts()
                _walk(getattr(sub, "jaxpr", sub), inner, branch)
                best = branch if best is None or branch.dots > best.dots else best
            if best is not None:
                counts.dots += best.dots
                counts.conversions += best.conversions
                counts.unknown_loop |= best.unknown_loop
                counts.loops |= best.loops
            continue
        for sub in subs:
            _walk(getattr(sub, "jaxpr", sub), inner, counts)


def compiled_passes(hlo_text: str) -> int | None:
    """Compute ops in the ENTRY computation of compiled HLO text (fusions count once)."""
    start = hlo_text.find("\nENTRY ")
    if start < 0:
        return None
    body = hlo_text[start:].split("\n}", 1)[0]
    ops = [m[1] for m in _ENTRY_OP.finditer(body)]
    return sum(op not in _FREE_OPS for op in ops) if ops else None


def _lowered_flops(lowered: Any) -> float | None:
    try:
        raw = lowered.cost_analysis()
    except (NotImplementedError, RuntimeError, AttributeError):
        return None
    if isinstance(raw, list):
        raw = raw[0] if raw else None
    return float(raw["flops"]) if raw and raw.get("flops") is not None else None


def yardstick(fn: Callable[..., Any], args: Sequence[Any], compiled: Any) -> Yardstick:
    """The native implementation's dot FLOPs, XLA's FLOPs without conversions and the
    number of passes it compiled to (``compiled``: its executable)."""
    traced = jax.jit(fn).trace(*args)
    counts = _Counts()
    _walk(traced.jaxpr.jaxpr, 1, counts)
    flops = _lowered_flops(traced.lower())
    try:
        passes = compiled_passes(compiled.as_text())
    except (NotImplementedError, RuntimeError, AttributeError):
        passes = None
    return Yardstick(
        dot_flops=None if counts.unknown_loop else counts.dots,
        flops_without_conversions=None if flops is None else flops - counts.conversions,
        conversions=counts.conversions,
        passes=passes,
        loops=counts.loops,
    )
