"""Every ``pallas_call`` a traced case runs, as plain data the pipeline model can read.

``jax.make_jaxpr`` of the case's Pallas implementation holds, for each ``pallas_call``, its
grid, each operand's block shape and index map (``grid_mapping.block_mappings[*]
.index_map_jaxpr``), scratch shapes, the scalar-prefetch count, buffer counts and the
compiler params. Nothing runs on an accelerator and no kernel executes: the walk goes into
``jit``, ``custom_jvp``/``custom_vjp`` and remat; ``platform_dependent`` takes the branch of
the platform modelled (TPU, or GPU for the Triton bound); any other ``cond`` keeps every
branch for the model to take the worst; ``scan`` and fori-style ``while`` loops multiply
what they hold by their static trip counts. Index maps are evaluated for every grid step at
once (``vmap`` on CPU), in TPU order: row-major, last grid dimension fastest. Index maps
that read scalar-prefetch refs get the values the case's real inputs give them.

This module reads jax internals (``jax._src.pallas``); a jax whose internals moved makes a
case "not modelled" with jax's message, never a crash.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ci_bench.measure.model.body import StepCost, fori_trip_count, padded_bytes, step_cost
from ci_bench.measure.model.indexmap import evaluate

Platform = str  # "tpu" or "gpu"
_GPU_NAMES = ("cuda", "rocm", "gpu")
# Call-like primitives whose sub-jaxpr runs once, with the caller's operands.
_CALLS = ("jit", "pjit", "closed_call", "core_call", "remat", "checkpoint", "custom_lin")
_CUSTOM = ("custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr")


class NotModelledError(Exception):
    """Part of a case the model cannot read; the message says which and why."""


@dataclass(frozen=True)
class Operand:
    """One input or output of a call, with its block index at every grid step."""

    role: str  # "input" | "output"
    index: int
    origin: str
    shape: tuple[int, ...]
    dtype: str
    itemsize: int
    block: tuple[int, ...] | None  # block size per array dim; None: not pipelined (ANY)
    kernel_block: tuple[int, ...]  # the block as the kernel sees it (squeezed dims gone)
    element_dims: tuple[bool, ...]  # dims whose index is an element offset, not a block index
    memory_space: str  # vmem | smem | any | semaphore
    buffers: int
    indices: np.ndarray | None  # [steps, ndim] int64, grid order; None when not pipelined
    aliased_to: int | None = None

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.itemsize


@dataclass(frozen=True)
class Call:
    """One ``pallas_call`` as data: grid, operands, scratch, the step's body cost."""

    name: str | None
    grid: tuple[int, ...]
    semantics: tuple[str, ...] | None
    operands: tuple[Operand, ...]
    scratch_vmem_bytes: int
    smem_bytes: int  # scalar prefetch + SMEM scratch
    vmem_limit_bytes: int | None
    step: StepCost
    count: int = 1
    notes: tuple[str, ...] = ()

    @property
    def steps(self) -> int:
        return math.prod(self.grid)


@dataclass(frozen=True)
class Choice:
    """A ``cond`` around pallas_calls: the model keeps its costliest branch."""

    branches: tuple[tuple[Item, ...], ...]
    why: str


Item = Call | Choice


@dataclass
class Walk:
    """What a walk found: the calls (in order) and what it could not read."""

    items: list[Item] = field(default_factory=list)
    not_modelled: list[str] = field(default_factory=list)


def _jaxpr_of(obj: Any) -> tuple[Any, list[Any]]:
    """(Jaxpr, consts) of a Jaxpr or ClosedJaxpr param."""
    if hasattr(obj, "jaxpr") and hasattr(obj, "consts"):
        return obj.jaxpr, list(obj.consts)
    return obj, []


class Scope:
    """Concrete values of a jaxpr's variables, computed on demand from the case's inputs.

    Only scalar-prefetch operands are ever asked for: the slice of the program that
    computes one is run on CPU (no pallas_call may be in it: no kernel ever executes).
    """

    def __init__(self, jaxpr: Any, consts: Sequence[Any], inputs: Callable[[int], Any]):
        self.jaxpr, self.consts, self.inputs = jaxpr, list(consts), inputs
        self._cache: dict[Any, Any] = {}

    def child(self, jaxpr: Any, consts: Sequence[Any], operands: Sequence[Any]) -> Scope:
        return Scope(jaxpr, consts, lambda i: self.value(operands[i]))

    def value(self, atom: Any) -> Any:
        from jax.extend import core as jcore

        if isinstance(atom, jcore.Literal):
            return np.asarray(atom.val)
        if atom in self._cache:
            return self._cache[atom]
        if atom in self.jaxpr.invars:
            found = self.inputs(self.jaxpr.invars.index(atom))
        elif atom in self.jaxpr.constvars:
            found = self.consts[self.jaxpr.constvars.index(atom)]
        else:
            found = self._compute(atom)
        self._cache[atom] = found
        return found

    def _compute(self, atom: Any) -> Any:
        import jax
        from jax._src import core as jax_core
        from jax._src.interpreters import partial_eval as pe

        whole = pe.convert_constvars_jaxpr(self.jaxpr)
        sliced, used = pe.dce_jaxpr(whole.replace(outvars=[atom]), [True])
        if _holds_pallas_call(sliced):
            raise NotModelledError("a scalar-prefetch operand computed by another pallas_call")
        sources = [*self.jaxpr.constvars, *self.jaxpr.invars]
        args = [self.value(v) for v, u in zip(sources, used, strict=True) if u]
        with jax.default_device(jax.devices("cpu")[0]):
            (out,) = jax_core.eval_jaxpr(sliced, [], *args)
        return np.asarray(out)


def _holds_pallas_call(jaxpr: Any) -> bool:
    from jax.extend import core as jcore

    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pallas_call":
            return True
        for sub in jcore.jaxprs_in_params(eqn.params):
            if _holds_pallas_call(sub.jaxpr if hasattr(sub, "jaxpr") else sub):
                return True
    return False


def _branch_for(platforms: Sequence[Any], platform: Platform) -> int | None:
    """The platform_dependent branch a platform lowers: its own, else the default."""
    names = _GPU_NAMES if platform == "gpu" else ("tpu",)
    for index, entry in enumerate(platforms):
        if entry is not None and any(p in names for p in entry):
            return index
    return next((i for i, entry in enumerate(platforms) if entry is None), None)


def walk(jaxpr: Any, scope: Scope, platform: Platform, count: int = 1) -> Walk:
    """The pallas_calls ``jaxpr`` runs on ``platform``, each with its trip count."""
    found = Walk()
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        params = eqn.params
        try:
            if name == "pallas_call":
                found.items.append(build_call(eqn, scope, count))
            elif name in _CALLS or name in _CUSTOM:
                key = next(k for k in ("jaxpr", "call_jaxpr", "fun_jaxpr") if k in params)
                inner, consts = _jaxpr_of(params[key])
                _merge(found, walk(inner, scope.child(inner, consts, eqn.invars), platform, count))
            elif name == "cond":
                _cond(found, eqn, scope, platform, count)
            elif name == "scan":
                inner, consts = _jaxpr_of(params["jaxpr"])
                n = params["num_consts"]
                operands = list(eqn.invars[:n]) + [None] * (len(inner.invars) - n)
                child = _loop_scope(scope, inner, consts, operands)
                _merge(found, walk(inner, child, platform, count * params["length"]))
            elif name == "while":
                _while(found, eqn, scope, platform, count)
            elif name in ("shard_map", "xla_pmap"):
                found.not_modelled.append(f"pallas_calls under {name} (sharded) not modelled")
        except NotModelledError as exc:
            found.not_modelled.append(str(exc))
    return found


def _merge(into: Walk, other: Walk) -> None:
    into.items += other.items
    into.not_modelled += [n for n in other.not_modelled if n not in into.not_modelled]


def _loop_scope(scope: Scope, inner: Any, consts: Sequence[Any], operands: list[Any]) -> Scope:
    """A loop body's scope: its constants are known, its carries vary per iteration."""

    def value(i: int) -> Any:
        if operands[i] is None:
            raise NotModelledError("a scalar-prefetch operand that changes inside a loop")
        return scope.value(operands[i])

    return Scope(inner, consts, value)


def _cond(found: Walk, eqn: Any, scope: Scope, platform: Platform, count: int) -> None:
    branches = eqn.params["branches"]
    platforms = eqn.params.get("branches_platforms")
    operands = eqn.invars[1:]
    walks = []
    for index, branch in enumerate(branches):
        if platforms is not None and index != _branch_for(platforms, platform):
            continue
        inner, consts = _jaxpr_of(branch)
        walks.append(walk(inner, scope.child(inner, consts, operands), platform, count))
    if platforms is not None and not walks:
        found.not_modelled.append(f"platform_dependent has no branch for {platform}")
        return
    for w in walks:
        found.not_modelled += [n for n in w.not_modelled if n not in found.not_modelled]
    if len(walks) == 1:
        found.items += walks[0].items
    elif any(w.items for w in walks):
        why = f"a cond with {len(walks)} branches: the costliest one is modelled"
        found.items.append(Choice(tuple(tuple(w.items) for w in walks), why))


def _while(found: Walk, eqn: Any, scope: Scope, platform: Platform, count: int) -> None:
    inner, consts = _jaxpr_of(eqn.params["body_jaxpr"])
    n = eqn.params["body_nconsts"]
    c = eqn.params["cond_nconsts"]
    operands = list(eqn.invars[c : c + n]) + [None] * (len(inner.invars) - n)
    trips = fori_trip_count(eqn)
    child = _loop_scope(scope, inner, consts, operands)
    body = walk(inner, child, platform, count * (trips or 1))
    if body.items and trips is None:
        found.not_modelled.append("pallas_calls in a while loop with a dynamic trip count")
        return
    _merge(found, body)


def _memory_space(aval: Any) -> str:
    text = str(getattr(aval, "memory_space", "default")).lower()
    if "sem" in text:
        return "semaphore"
    if "any" in text or "hbm" in text:
        return "any"
    return "smem" if "smem" in text else "vmem"


def _block_dims(block_shape: Sequence[Any]) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    from jax._src.pallas import core as pallas_core

    sizes, element = [], []
    for dim in block_shape:
        if isinstance(dim, pallas_core.Squeezed):
            sizes.append(1)
            element.append(True)
        elif isinstance(dim, pallas_core.Blocked):
            sizes.append(int(dim.block_size))
            element.append(False)
        elif isinstance(dim, pallas_core.Element):
            sizes.append(int(dim.block_size))
            element.append(True)
        else:
            raise NotModelledError(f"block dimension {dim} (only Blocked, Squeezed, Element)")
    return tuple(sizes), tuple(element)


def block_indices(bm: Any, grid: tuple[int, ...], prefetch: Sequence[Any]) -> np.ndarray:
    """The block index of every grid step, [steps, ndim], in row-major grid order."""
    import jax
    import jax.numpy as jnp
    from jax._src import core as jax_core
    from jax._src.state import discharge as state_discharge

    closed = bm.index_map_jaxpr
    if prefetch:
        closed = state_discharge.discharge_state(closed)
    fun = jax_core.jaxpr_as_fun(closed)
    ndim = len(bm.block_shape)
    if bm.index_map_out_tree.num_leaves != ndim:
        raise NotModelledError(
            f"{bm.origin}: an index map returning slices (pl.ds) is not modelled"
        )
    ids = np.indices(grid).reshape(len(grid), -1) if grid else np.zeros((0, 1), np.int64)
    if not prefetch:
        found = evaluate(closed.jaxpr, closed.consts, list(ids.astype(np.int32)))
        if found is not None:
            steps = ids.shape[1] if grid else 1
            cols = [np.broadcast_to(np.asarray(x, np.int64), (steps,)) for x in found[:ndim]]
            return np.stack(cols, axis=1) if cols else np.zeros((steps, 0), np.int64)

    def one(*gid: Any) -> Any:
        return jnp.stack([jnp.asarray(x, jnp.int32) for x in fun(*gid, *prefetch)[:ndim]])

    with jax.default_device(jax.devices("cpu")[0]):
        out = jax.vmap(one)(*[jnp.asarray(i, jnp.int32) for i in ids]) if grid else one()[None]
    return np.asarray(out, np.int64).reshape(-1, ndim)


def _compiler_params(params: dict[str, Any]) -> tuple[tuple[str, ...] | None, int | None]:
    cp = params.get("compiler_params")
    if isinstance(cp, dict):  # older jax: {"mosaic": {...}}
        cp = cp.get("mosaic_tpu") or cp.get("mosaic")
    semantics = getattr(cp, "dimension_semantics", None)
    limit = getattr(cp, "vmem_limit_bytes", None)
    if semantics is not None:
        semantics = tuple(str(getattr(s, "name", s)).lower() for s in semantics)
    return semantics, int(limit) if limit else None


def build_call(eqn: Any, scope: Scope, count: int) -> Call:
    """One pallas_call equation as a ``Call`` (index maps evaluated over the whole grid)."""
    params = eqn.params
    gm = params["grid_mapping"]
    if any(not isinstance(g, int) for g in gm.grid):
        raise NotModelledError("a pallas_call with a dynamic grid")
    grid = tuple(int(g) for g in gm.grid)
    n_dyn = sum(1 for g in gm.grid if not isinstance(g, int))
    n_idx = gm.num_index_operands
    prefetch_vars = eqn.invars[n_dyn : n_dyn + n_idx]
    prefetch = [scope.value(v) for v in prefetch_vars] if n_idx else []
    aliases = {int(i) - n_idx: int(o) for i, o in params.get("input_output_aliases", ())}
    operands = []
    for k, bm in enumerate(gm.block_mappings):
        role = "input" if k < gm.num_inputs else "output"
        index = k if role == "input" else k - gm.num_inputs
        aval = bm.array_aval
        space = _memory_space(bm.transformed_block_aval)
        sizes, element = _block_dims(bm.block_shape)
        pipelined = space in ("vmem", "smem")
        mode = bm.pipeline_mode
        buffers = int(getattr(mode, "buffer_count", 2) or 2) if pipelined else 0
        operands.append(
            Operand(
                role=role,
                index=index,
                origin=str(bm.origin),
                shape=tuple(int(d) for d in aval.shape),
                dtype=np.dtype(aval.dtype).name,
                itemsize=np.dtype(aval.dtype).itemsize,
                block=sizes if pipelined else None,
                kernel_block=tuple(int(d) for d in bm.transformed_block_aval.shape),
                element_dims=element,
                memory_space=space,
                buffers=buffers,
                indices=block_indices(bm, grid, prefetch) if pipelined else None,
                aliased_to=aliases.get(index) if role == "input" else None,
            )
        )
    scratch_vmem = smem = 0
    for aval in gm.scratch_avals:
        space = _memory_space(aval)
        if space in ("semaphore", "any") or not hasattr(aval, "dtype"):
            continue
        size = padded_bytes(tuple(aval.shape), np.dtype(aval.dtype).itemsize)
        if space == "smem":
            smem += math.prod(aval.shape) * max(np.dtype(aval.dtype).itemsize, 4)
        else:
            scratch_vmem += size
    smem += sum(math.prod(v.aval.shape) * max(v.aval.dtype.itemsize, 4) for v in prefetch_vars)
    semantics, limit = _compiler_params(params)
    step = step_cost(params["jaxpr"])
    name = params.get("name") or getattr(params.get("metadata"), "name", None)
    if name is None:
        debug = getattr(params["jaxpr"], "debug_info", None)
        name = getattr(debug, "func_name", None)
    return Call(
        name=str(name) if name else None,
        grid=grid,
        semantics=semantics,
        operands=tuple(operands),
        scratch_vmem_bytes=scratch_vmem,
        smem_bytes=smem,
        vmem_limit_bytes=limit,
        step=step,
        count=count,
    )
