"""One ``pallas_call`` equation as plain data: grid, operands with their block index at
every grid step, scratch, compiler params and the body's cost per step.

Reads jax internals (``jax._src.pallas``: GridMapping, BlockMapping.index_map_jaxpr); a
jax whose internals moved makes the case "not modelled" with jax's message.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ci_bench.measure.model.body import StepCost, step_cost
from ci_bench.measure.model.indexmap import evaluate
from ci_bench.measure.model.jaxpr_read import fori_trip_count
from ci_bench.measure.model.temporaries import carries_nothing, scratch_bytes, temporaries_bytes

if TYPE_CHECKING:
    from ci_bench.measure.model.extract import Scope


class NotModelledError(Exception):
    """Part of a case the model cannot read; the message says which and why."""


class BudgetError(Exception):
    """A case past the model's memory budget: the whole case is not modelled (never part)."""


# Index maps are evaluated for every grid step at once (a few int64 arrays of [steps, ndim]):
# past this many steps of one call the model refuses the case rather than take gigabytes.
MAX_GRID_STEPS = 1 << 22


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
    # The body jaxpr and compiler params as jax holds them (the GPU model reads both).
    body: Any = None
    compiler_params: Any = None
    # The GPU model's hook: scalar-prefetch operands ahead of the body's refs, and input
    # k's concrete value on demand (Triton kernels read group bounds from them).
    index_operands: int = 0
    operand_value: Any = None
    # VMEM Mosaic takes for the body's own values beyond blocks and scratch (temporaries.py).
    temporaries_vmem_bytes: int = 0

    @property
    def steps(self) -> int:
        return math.prod(self.grid)


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


def _sized_at_run_time(jaxpr: Any) -> bool:
    """Whether a body holds a ``while`` without literal bounds (anywhere inside)."""
    from jax.extend import core as jcore

    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "while" and fori_trip_count(eqn) is None:
            return True
        for sub in jcore.jaxprs_in_params(eqn.params):
            if _sized_at_run_time(sub.jaxpr if hasattr(sub, "jaxpr") else sub):
                return True
    return False


def _smem_inputs(eqn: Any, body: Any, scope: Scope, n_dyn: int, n_idx: int) -> dict:
    """The values of a call's whole-array SMEM inputs (a pipeline's grid and group metadata
    passed in SMEM, as tokamax's emit_pipeline kernels do), from the case's inputs; an
    input the model cannot compute (made by another pallas_call) is left out."""
    gm = eqn.params["grid_mapping"]
    found = {}
    for k, bm in enumerate(gm.block_mappings[: gm.num_inputs]):
        if _memory_space(bm.transformed_block_aval) != "smem":
            continue
        try:
            value = scope.value(eqn.invars[n_dyn + n_idx + k])
        except NotModelledError:
            continue
        found[body.invars[n_idx + k]] = np.asarray(value)
    return found


def build_call(eqn: Any, scope: Scope, count: int) -> Call:
    """One pallas_call equation as a ``Call`` (index maps evaluated over the whole grid)."""
    params = eqn.params
    gm = params["grid_mapping"]
    n_dyn = sum(1 for g in gm.grid if not isinstance(g, int))
    # A dynamic grid dimension (an operand of the call) takes the value the case's real
    # inputs give it, as scalar-prefetch index maps do (megablox's active tile count).
    dynamic = iter(int(np.asarray(scope.value(v))) for v in eqn.invars[:n_dyn])
    grid = tuple(int(g) if isinstance(g, int) else next(dynamic) for g in gm.grid)
    notes = ("a dynamic grid: its size from the case's inputs",) if n_dyn else ()
    if math.prod(grid) > MAX_GRID_STEPS:
        raise BudgetError(
            f"a grid of {math.prod(grid):,} steps is past the model's budget of "
            f"{MAX_GRID_STEPS:,} steps per call (index maps are evaluated at every step)"
        )
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
    semantics, limit = _compiler_params(params)
    body = params["jaxpr"]
    scratch_refs = body.invars[len(body.invars) - len(gm.scratch_avals) :]
    local = carries_nothing(grid, semantics)
    scratch_vmem = smem = 0
    for aval, ref in zip(gm.scratch_avals, scratch_refs, strict=True):
        space = _memory_space(aval)
        if space in ("semaphore", "any") or not hasattr(aval, "dtype"):
            continue
        shape, itemsize = tuple(aval.shape), np.dtype(aval.dtype).itemsize
        if space == "smem":
            smem += math.prod(aval.shape) * max(itemsize, 4)
        else:
            scratch_vmem += scratch_bytes(body, ref, shape, itemsize, local)
    smem += sum(math.prod(v.aval.shape) * max(v.aval.dtype.itemsize, 4) for v in prefetch_vars)
    # Scalar-prefetch refs (the body's first inputs) hold the case's values: a loop bound
    # or an index a body reads from them is known at every grid step.
    refs = {v: np.asarray(x) for v, x in zip(body.invars[:n_idx], prefetch, strict=False)}
    refs |= _smem_inputs(eqn, body, scope, n_dyn, n_idx) if _sized_at_run_time(body) else {}
    step = step_cost(body, grid, refs)
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
        notes=notes,
        body=body,
        compiler_params=params.get("compiler_params"),
        index_operands=n_idx,
        operand_value=lambda k: scope.value(eqn.invars[n_dyn + n_idx + k]),
        temporaries_vmem_bytes=temporaries_bytes(body),
    )
