"""What a Triton ``pallas_call``'s programs read and write, from the body (pure).

A Triton block spec moves nothing: it offsets a pointer, and the body's ``load``/``store``
(``x_ref[...]``, ``ref.at[...].load()``, ``plgpu.load``) are what touch HBM. So a Triton
call's HBM traffic is read from the body, per grid program: every load and store with its
bytes and how many times the program runs it (static trip counts, or a ``fori_loop`` bound
the program computes from ``program_id`` and scalar operands), and only in the branch of a
``pl.when``/``cond`` the program takes, when its predicate is computable the same way
(ragged kernels: most programs of a ``(m blocks, n blocks, groups)`` grid do nothing).

Scalars are evaluated for every program at once (numpy arrays over the grid); inside a
loop a value is its first iteration's (the programs of one wave advance together). A load
whose address every program computes alike at the same iteration (same block index, same
scalar offsets) is fetched from HBM once per wave and served from L2 to the others; a load
with an address the model cannot compute is fetched by every program (an upper bound).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ci_bench.measure.model.gpubody import GpuWork, gpu_work
from ci_bench.measure.model.jaxpr_read import fori_trip_count

_LOADS = ("get", "load", "masked_load")
_STORES = ("swap", "store", "masked_swap")
_STRUCT = (
    "cond",
    "while",
    "scan",
    "jit",
    "pjit",
    "closed_call",
    "custom_jvp_call",
    "custom_vjp_call",
)
_SCALAR_OPS: dict[str, Callable[..., Any]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": lambda a, b: np.floor_divide(a, b) if np.issubdtype(a.dtype, np.integer) else a / b,
    "rem": np.remainder,
    "max": np.maximum,
    "min": np.minimum,
    "neg": np.negative,
    "sign": np.sign,
    "abs": np.abs,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
    "and": np.logical_and,
    "or": np.logical_or,
    "not": np.logical_not,
    "convert_element_type": lambda a: a,
    "multiple_of": lambda a: a,
    "select_n": lambda p, *xs: np.choose(p.astype(np.int64), xs),
    "clamp": lambda lo, x, hi: np.clip(x, lo, hi),
}


@dataclass(frozen=True)
class Ref:
    """A body ref: the call operand it points into (None: scratch, no HBM)."""

    operand: int | None


@dataclass
class Access:
    """One load or store site: bytes each time, times per program, its address key."""

    operand: int
    store: bool
    nbytes: int
    times: np.ndarray  # [programs] float
    key: np.ndarray | None  # [programs, n] address parts; None: not computable
    scalar: bool = False


@dataclass
class Traffic:
    """A Triton call's per-program accesses and work."""

    programs: int
    accesses: list[Access] = field(default_factory=list)
    tensor_flops: dict[str, np.ndarray] = field(default_factory=dict)
    element_ops: np.ndarray | None = None
    transcendental_ops: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)  # approximations, said beside the figure
    unknown: list[str] = field(default_factory=list)  # what makes the figure partial

    def active(self) -> np.ndarray:
        """Programs that move a tile or compute: one that reads a few scalars and takes
        an empty branch exits at once (it still costs a launch slot, not timed)."""
        busy = np.zeros(self.programs, bool)
        for a in self.accesses:
            if not a.scalar:
                busy |= a.times > 0
        for f in self.tensor_flops.values():
            busy |= f > 0
        return busy

    def flops_of(self, kind: str) -> np.ndarray:
        return self.tensor_flops.get(kind, np.zeros(self.programs))


class _Walker:
    def __init__(self, grid: tuple[int, ...], values: Callable[[int], Any], operands: Any):
        self.grid = grid
        self.steps = math.prod(grid)
        self.ids = np.indices(grid).reshape(len(grid), -1) if grid else np.zeros((0, 1), int)
        self.values = values
        self.operands = operands
        self.out = Traffic(self.steps)
        self.out.element_ops = np.zeros(self.steps)
        self.out.transcendental_ops = np.zeros(self.steps)

    # A scalar's value for every program, (array [programs], varies in the loop), or None.
    def value(self, env: dict[Any, Any], atom: Any) -> Any:
        if hasattr(atom, "val"):
            return (np.broadcast_to(np.asarray(atom.val), (self.steps,)), False)
        return env.get(atom)

    def work(self, eqns: Sequence[Any], times: np.ndarray, in_loop: bool) -> None:
        if not eqns:
            return
        found: GpuWork = gpu_work(_Shim(list(eqns)), in_loop)
        for kind, flops in found.tensor_flops.items():
            self.out.tensor_flops[kind] = self.out.flops_of(kind) + flops * times
        assert self.out.element_ops is not None
        assert self.out.transcendental_ops is not None
        self.out.element_ops += found.element_ops * times
        self.out.transcendental_ops += found.transcendental_ops * times
        # gpu_work's own gaps are answered here (loops and branches are walked per
        # program); what it cannot count inside a straight run stays a gap.
        self.out.unknown += [n for n in found.not_modelled if n not in self.out.unknown]

    def access(self, env: dict[Any, Any], eqn: Any, times: np.ndarray, store: bool) -> None:
        ref = env.get(eqn.invars[0])
        if not isinstance(ref, Ref) or ref.operand is None:
            return
        var = eqn.invars[1] if store else eqn.outvars[0]
        nbytes = math.prod(var.aval.shape) * np.dtype(var.aval.dtype).itemsize
        op = self.operands[ref.operand]
        cols = [op.indices] if op.indices is not None else []
        for atom in eqn.invars[(2 if store else 1) :]:
            if getattr(atom.aval, "shape", None) != ():
                continue  # a mask or a value, not an offset (array offsets: below)
            found = self.value(env, atom)
            if found is None:
                cols = None
                break
            cols.append(found[0][:, None].astype(np.int64))
        if cols is not None and any(
            getattr(a.aval, "shape", ()) not in ((), None)
            and np.issubdtype(a.aval.dtype, np.integer)
            for a in eqn.invars[(2 if store else 1) :]
        ):
            cols = None  # gathered offsets: not an address the model computes
        key = None
        if cols is not None:
            key = np.concatenate(cols, axis=1) if cols else np.zeros((self.steps, 0), np.int64)
        scalar = var.aval.shape == ()
        self.out.accesses.append(Access(ref.operand, store, nbytes, times.copy(), key, scalar))
        if not store and eqn.outvars[0].aval.shape == () and len(eqn.invars) == 1:
            env[eqn.outvars[0]] = self.scalar_load(ref.operand)

    def scalar_load(self, k: int) -> Any:
        """A scalar input block's value per program (ragged kernels' group bounds)."""
        op = self.operands[k]
        if op.role != "input" or op.indices is None or op.kernel_block != ():
            return None
        if not all(op.element_dims):
            return None
        try:
            array = np.asarray(self.values(k))
        except Exception:  # a value the case cannot give: unknown
            return None
        if array.shape != op.shape:
            return None
        return (array[tuple(op.indices.T)], False)

    def walk(self, jaxpr: Any, env: dict[Any, Any], times: np.ndarray, in_loop: bool) -> None:
        plain: list[Any] = []
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            if name in _STRUCT:
                self.work(plain, times, in_loop)
                plain = []
                self.structure(eqn, env, times, in_loop)
                continue
            plain.append(eqn)
            if name in _LOADS or name in _STORES:
                self.access(env, eqn, times, name in _STORES)
            elif name == "program_id":
                env[eqn.outvars[0]] = (self.ids[eqn.params["axis"]], False)
            elif name == "num_programs":
                size = self.grid[eqn.params["axis"]]
                env[eqn.outvars[0]] = (np.full(self.steps, size), False)
            elif name in _SCALAR_OPS and eqn.outvars[0].aval.shape == ():
                args = [self.value(env, a) for a in eqn.invars]
                if all(a is not None for a in args):
                    with np.errstate(all="ignore"):
                        result = _SCALAR_OPS[name](*[np.asarray(a[0]) for a in args])
                    env[eqn.outvars[0]] = (np.asarray(result), any(a[1] for a in args))
        self.work(plain, times, in_loop)

    def bind(self, env: dict[Any, Any], inner: Sequence[Any], outer: Sequence[Any]) -> dict:
        child: dict[Any, Any] = {}
        for i, o in zip(inner, outer, strict=False):
            found = env.get(o) if not hasattr(o, "val") else self.value(env, o)
            if found is not None:
                child[i] = found
        return child

    def structure(self, eqn: Any, env: dict[Any, Any], times: np.ndarray, in_loop: bool) -> None:
        name = eqn.primitive.name
        if name == "cond":
            branches = [b.jaxpr for b in eqn.params["branches"]]
            which = self.value(env, eqn.invars[0])
            if which is None or which[1]:
                costs = [gpu_work(b).flops + gpu_work(b).element_ops for b in branches]
                pick = int(np.argmax(costs))
                which = (np.full(self.steps, pick), False)
                note = "a cond whose branch the model cannot compute: its costliest branch"
                if note not in self.out.notes:
                    self.out.notes.append(note)
            index = np.clip(np.asarray(which[0]).astype(np.int64), 0, len(branches) - 1)
            for b, branch in enumerate(branches):
                mask = index == b
                if mask.any():
                    child = self.bind(env, branch.invars, eqn.invars[1:])
                    self.walk(branch, child, times * mask, in_loop)
        elif name == "scan":
            body = eqn.params["jaxpr"].jaxpr
            consts, carry = eqn.params["num_consts"], eqn.params["num_carry"]
            child = self.bind(env, body.invars[:consts], eqn.invars[:consts])
            inner = body.invars[consts : consts + carry]
            for i, o in zip(inner, eqn.invars[consts:], strict=False):
                found = self.value(env, o)
                if found is not None:
                    child[i] = (found[0], True)
            self.walk(body, child, times * eqn.params["length"], True)
        elif name == "while":
            self.loop(eqn, env, times)
        else:
            subs = [j.jaxpr if hasattr(j, "jaxpr") else j for j in _jaxprs(eqn)]
            for sub in subs:
                child = self.bind(env, sub.invars, eqn.invars)
                self.walk(sub, child, times, in_loop)
                if len(subs) == 1:  # a call: its scalar results are the caller's
                    for inner, outer in zip(sub.outvars, eqn.outvars, strict=False):
                        found = self.value(child, inner)
                        if found is not None:
                            env[outer] = found

    def loop(self, eqn: Any, env: dict[Any, Any], times: np.ndarray) -> None:
        """A while: a static fori trip count, or one each program computes (lo, hi carried)."""
        body = eqn.params["body_jaxpr"].jaxpr
        nb, nc = eqn.params["body_nconsts"], eqn.params["cond_nconsts"]
        carries = eqn.invars[nc + nb :]
        trips: Any = fori_trip_count(eqn)
        if trips is None:
            cond = eqn.params["cond_jaxpr"].jaxpr
            trips = self.dynamic_trips(cond, env, eqn.invars[:nc], carries)
        if trips is None:
            note = "a while loop whose trip count the model cannot compute: counted once"
            if note not in self.out.unknown:
                self.out.unknown.append(note)
            trips = 1
        child = self.bind(env, body.invars[:nb], eqn.invars[nc : nc + nb])
        for i, o in zip(body.invars[nb:], carries, strict=False):
            found = self.value(env, o)
            if found is not None:
                child[i] = (found[0], True)
        self.walk(body, child, times * np.maximum(np.asarray(trips, float), 0), True)

    def dynamic_trips(
        self, cond: Any, env: dict[Any, Any], consts: Sequence[Any], carries: Sequence[Any]
    ) -> Any:
        if len(cond.eqns) != 1 or cond.eqns[0].primitive.name != "lt":
            return None
        outer = dict(zip(cond.invars, [*consts, *carries], strict=False))
        lhs, rhs = (self.value(env, outer.get(v, v)) for v in cond.eqns[0].invars)
        if lhs is None or rhs is None or lhs[1] or rhs[1]:
            return None
        return np.asarray(rhs[0], float) - np.asarray(lhs[0], float)


class _Shim:
    """A run of equations as gpu_work reads a jaxpr."""

    def __init__(self, eqns: list[Any]):
        self.eqns = eqns


def _jaxprs(eqn: Any) -> list[Any]:
    from jax.extend import core as jcore

    return list(jcore.jaxprs_in_params(eqn.params))


def triton_traffic(call: Any) -> Traffic:
    """Per-program loads, stores and work of a Triton call (``Call`` with its body)."""
    body = call.body
    walker = _Walker(call.grid, call.operand_value or (lambda _: None), call.operands)
    env: dict[Any, Any] = {}
    for k, var in enumerate(body.invars[call.index_operands :]):
        env[var] = Ref(k if k < len(call.operands) else None)  # then scratch: no HBM
    walker.walk(body, env, np.ones(walker.steps), False)
    return walker.out


def hbm_bytes(
    traffic: Traffic, order: np.ndarray, concurrent: int, operands: int
) -> tuple[int, list[int]]:
    """HBM bytes of one run over the active programs in launch order, ``concurrent`` at a
    time, and per operand index: a load site whose address several programs of a wave
    share is fetched once for them (L2), each store is written."""
    active = traffic.active()
    live = order[active[order]]
    per: dict[int, float] = {}
    for a in traffic.accesses:
        if a.store or a.key is None:
            moved = float(a.times[live].sum()) * a.nbytes
        else:
            moved = 0.0
            for start in range(0, len(live), concurrent):
                wave = live[start : start + concurrent]
                _, inverse = np.unique(a.key[wave], axis=0, return_inverse=True)
                most = np.zeros(int(inverse.max()) + 1 if len(wave) else 0)
                np.maximum.at(most, inverse.ravel(), a.times[wave])
                moved += float(most.sum()) * a.nbytes
        per[a.operand] = per.get(a.operand, 0.0) + moved
    return int(sum(per.values())), [int(per.get(k, 0)) for k in range(operands)]


def loaded_bytes(traffic: Traffic) -> int:
    """Bytes the active programs load, each for itself: what crosses from L2 to the SMs
    (the model does not time it: no L2 bandwidth with a public source)."""
    live = traffic.active()
    return int(sum(a.nbytes * float(a.times[live].sum()) for a in traffic.accesses if not a.store))
