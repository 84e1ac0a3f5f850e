"""What one GPU program (one grid step of a Triton or Mosaic GPU ``pallas_call``) computes:
tensor-core FLOPs by operand kind, and the non-matmul work the model does not time yet.

A ``dot_general`` is ``2 x prod(output) x prod(contracted)`` FLOPs, run on the tensor
cores at the peak of its operands' kind: bf16/fp16, fp8, int8; float32 at jax's DEFAULT or
HIGH precision as TF32 (Pallas Triton's lowering, ``_TF32_PRECISIONS``), at HIGHEST on the
CUDA cores' FP32 rate. An ``add`` of a dot's result is the MMA's accumulator (Triton's
combine pass folds ``acc + dot(a, b)`` into ``dot(a, b, acc)``): not counted. Every other
elementwise op counts its output's elements, transcendental ones (``exp``, ``log``,
``tanh``, ``rsqrt``...) apart: they run on the SFUs at an eighth of the FP32 FMA rate
(CUDA C++ Programming Guide, "Arithmetic Instructions": 128 FP32 results and 16 MUFU
results per clock per SM, compute capability 9.0). Loops multiply their body by static trip
counts; a ``cond`` counts its costliest branch; what cannot be counted is listed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ci_bench.measure.model.body import _precision_name
from ci_bench.measure.model.jaxpr_read import fori_trip_count

# Data movement and bookkeeping: no arithmetic.
_FREE = {
    "get",
    "swap",
    "load",
    "store",
    "masked_load",
    "masked_swap",
    "program_id",
    "num_programs",
    "broadcast_in_dim",
    "reshape",
    "squeeze",
    "expand_dims",
    "transpose",
    "slice",
    "dynamic_slice",
    "concatenate",
    "iota",
    "multiple_of",
    "copy",
    "copy_p",
    # A cast feeds the load or store beside it (one instruction per element, fused).
    "convert_element_type",
    "pjit",
    "device_put",
    "bitcast_convert_type",
    "stop_gradient",
}
_TRANSCENDENTAL = {
    "exp",
    "exp2",
    "log",
    "log1p",
    "expm1",
    "tanh",
    "logistic",
    "rsqrt",
    "sqrt",
    "sin",
    "cos",
    "tan",
    "pow",
    "erf",
    "erf_inv",
    "atan2",
}


@dataclass
class GpuWork:
    """One program's work (mutable while a body is walked)."""

    tensor_flops: dict[str, float] = field(default_factory=dict)  # kind -> FLOPs
    element_ops: float = 0.0  # elementwise results (not the MMA accumulator's adds)
    transcendental_ops: float = 0.0
    # Each dot operand's tile: (the dot's id, operand, bytes, staged). Staged: loaded from a
    # ref inside a loop, so Triton's software pipeline keeps ``num_stages`` copies of it.
    dot_tiles: list[tuple[int, int, int, bool]] = field(default_factory=list)
    not_modelled: list[str] = field(default_factory=list)

    def add(self, other: GpuWork, times: float = 1) -> None:
        for kind, flops in other.tensor_flops.items():
            self.tensor_flops[kind] = self.tensor_flops.get(kind, 0.0) + flops * times
        self.element_ops += other.element_ops * times
        self.transcendental_ops += other.transcendental_ops * times
        self.dot_tiles += [t for t in other.dot_tiles if t not in self.dot_tiles]
        self.not_modelled += [n for n in other.not_modelled if n not in self.not_modelled]

    @property
    def flops(self) -> float:
        return sum(self.tensor_flops.values())


def dot_kind(eqn: Any) -> str:
    """The tensor-core peak a dot runs at: bf16 (also fp16), tf32, fp32, fp8 or int8."""
    names = {np.dtype(v.aval.dtype).name for v in eqn.invars[:2]}
    if names <= {"int8", "uint8", "int4", "uint4"}:
        return "int8"
    if any(n.startswith("float8") for n in names):
        return "fp8"
    if "float32" in names or "float64" in names:
        return "fp32" if _precision_name(eqn.params.get("precision")) == "HIGHEST" else "tf32"
    return "bf16"


def _dot(eqn: Any, loaded: set[Any], in_loop: bool) -> GpuWork:
    (contract, _), _ = eqn.params["dimension_numbers"]
    lhs = eqn.invars[0].aval
    k = math.prod(lhs.shape[d] for d in contract)
    work = GpuWork(tensor_flops={dot_kind(eqn): 2.0 * math.prod(eqn.outvars[0].aval.shape) * k})
    for index, var in enumerate(eqn.invars[:2]):
        nbytes = math.prod(var.aval.shape) * np.dtype(var.aval.dtype).itemsize
        staged = in_loop and not hasattr(var, "val") and var in loaded
        work.dot_tiles.append((id(eqn), index, nbytes, staged))
    return work


# A ref's loads, and what a loaded operand may pass through on its way to a dot and stay a
# staged load.
_LOADS = ("get", "load", "masked_load")
_PASS_THROUGH = ("convert_element_type", "transpose", "reshape", "broadcast_in_dim")


def _subs(eqn: Any) -> list[Any]:
    from jax.extend import core as jcore

    return [j.jaxpr if hasattr(j, "jaxpr") else j for j in jcore.jaxprs_in_params(eqn.params)]


def _is_one(atom: Any) -> bool:
    return hasattr(atom, "val") and np.ndim(atom.val) == 0 and float(atom.val) == 1.0


def gpu_work(jaxpr: Any, in_loop: bool = False) -> GpuWork:
    """The work of one execution of ``jaxpr`` (a kernel body, or part of one)."""
    total = GpuWork()
    dots: set[Any] = set()  # a dot's result, or a value the MMA makes of it for free
    loaded: set[Any] = set()  # loaded from a ref, or passed through on its way to a dot
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in _LOADS or (name in _PASS_THROUGH and _reads(eqn, loaded)):
            loaded |= set(eqn.outvars)
        if name == "dot_general":
            total.add(_dot(eqn, loaded, in_loop))
            dots |= set(eqn.outvars)
        elif _folded(eqn, dots):
            if _reads(eqn, dots):
                dots |= set(eqn.outvars)
        else:
            _add_work(total, eqn, in_loop)
    return total


def _reads(eqn: Any, values: set[Any]) -> bool:
    """Whether the equation takes one of ``values`` (a variable, not a literal)."""
    return any(not hasattr(v, "val") and v in values for v in eqn.invars)


def _folded(eqn: Any, dots: set[Any]) -> bool:
    """No instruction of its own: ``x * 1`` (the compiler folds it, exact in IEEE
    arithmetic), or an add to a dot's result (the accumulator, folded into the MMA)."""
    name = eqn.primitive.name
    if name == "mul":
        return any(_is_one(v) for v in eqn.invars)
    return name in ("add", "sub") and _reads(eqn, dots)


def _add_work(total: GpuWork, eqn: Any, in_loop: bool) -> None:
    """An equation's work other than a dot's, added to ``total``: a loop's body times its
    trips, a cond's costliest branch, the jaxprs inside it, or its elementwise results."""
    name = eqn.primitive.name
    if name == "while":
        total.add(*_while_work(eqn))
    elif name == "scan":
        total.add(gpu_work(eqn.params["jaxpr"].jaxpr, in_loop=True), eqn.params["length"])
    elif name == "cond":
        branches = [gpu_work(b.jaxpr, in_loop) for b in eqn.params["branches"]]
        total.add(max(branches, key=lambda w: (w.flops, w.element_ops)))
    elif (subs := _subs(eqn)) and name not in _FREE:
        for sub in subs:
            total.add(gpu_work(sub, in_loop))
    elif name not in _FREE and eqn.outvars:
        _add_elementwise(total, eqn)


def _while_work(eqn: Any) -> tuple[GpuWork, int]:
    """A while's body and its static trip count; a dynamic one counts the body once, and
    says so when the body does work."""
    trips = fori_trip_count(eqn)
    body = gpu_work(eqn.params["body_jaxpr"].jaxpr, in_loop=True)
    if trips is None:
        if body.flops or body.element_ops:
            body.not_modelled.append("a while loop with a dynamic trip count in the body")
        trips = 1
    return body, trips


def _add_elementwise(total: GpuWork, eqn: Any) -> None:
    """One result per element: of the output, or of the input for a reduction or scan;
    transcendental ones (the SFUs') apart."""
    name = eqn.primitive.name
    reduces = name.startswith(("reduce_", "cum")) or name == "argmax"
    counted = eqn.invars if reduces else eqn.outvars
    size = float(sum(math.prod(getattr(v.aval, "shape", ())) for v in counted))
    if name in _TRANSCENDENTAL:
        total.transcendental_ops += size
    else:
        total.element_ops += size
