"""What a kernel body's values are at every grid step: program ids, known SMEM tables
(scalar prefetch: the case's own inputs) and what the body computes from them, evaluated in
numpy over the whole grid; a ``cond``'s branch shares and a ``while``'s mean trip count
follow (pure: no jax tracing, only the equations' own rules through indexmap.evaluate)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

Env = dict  # variable -> its value at every grid step (an np.ndarray of [steps])
# In a ``cond`` branch's Env: the grid steps that take the branch (a bool [steps]), so that
# what the branch computes is weighed over those steps alone: an init ``pl.when(h == 0)``
# and an accumulate ``pl.when(h != 0)`` nested in a ``pl.when(stage == 0)`` are one dot.
TAKEN = "steps taking this branch"


def _taken(env: Env | None, steps: int) -> np.ndarray:
    """The steps that reach this part of the body (all of them outside any branch)."""
    mask = (env or {}).get(TAKEN)
    return np.ones(steps, bool) if mask is None else np.asarray(mask, bool)


def grid_values(
    jaxpr: Any, eqn: Any, atom: Any, grid: tuple[int, ...], env: Env | None = None
) -> np.ndarray | None:
    """``atom`` (an input of ``eqn`` in a kernel body) at every grid step, when the body
    computes it from program ids, ``env``'s known values and scalar reads of known SMEM
    refs (scalar prefetch: ``env`` maps such a ref to its array) alone; None otherwise."""
    from ci_bench.measure.model.indexmap import evaluate

    env = dict(env or {})
    if not (grid or env) or not hasattr(atom, "aval") or hasattr(atom, "val"):
        return None  # a grid-less call: one step, known only from ``env``
    if atom in env:
        return env[atom]
    needed, eqns, ids = {atom}, [], []
    for e in reversed(jaxpr.eqns[: jaxpr.eqns.index(eqn)]):
        if not any(v in needed for v in e.outvars):
            continue
        if e.primitive.name == "program_id":
            ids.append(e)
        elif e.primitive.name == "get" and e.invars[0] in env:
            read = _smem_read(jaxpr, e, grid, env)
            if read is None:
                return None
            env[e.outvars[0]] = read
        else:
            eqns.append(e)
            needed |= {v for v in e.invars if hasattr(v, "aval") and not hasattr(v, "val")}
    if atom in env:  # a scalar read itself
        return np.broadcast_to(np.asarray(env[atom]), (math.prod(grid),))
    leaves = [v for v in needed if v in env]
    if any((v in jaxpr.invars or v in jaxpr.constvars) and v not in env for v in needed):
        return None
    if not (ids or leaves or eqns):
        return None  # nothing computes it here
    # No program id and no known value: computed from literals alone (splash attention's
    # ``pl.when(jnp.logical_and(False, True))`` when it has no mask), the same every step.
    eqns.reverse()
    inputs = [e.outvars[0] for e in ids] + leaves
    sliced = jaxpr.replace(constvars=[], invars=inputs, outvars=[atom], eqns=eqns)
    steps = np.indices(grid).reshape(len(grid), -1) if grid else np.zeros((0, 1), np.int64)
    args = [steps[int(e.params["axis"])] for e in ids] + [env[v] for v in leaves]
    found = evaluate(sliced, [], args)
    if found is None:
        return None
    return np.broadcast_to(np.asarray(found[0]), (steps.shape[1],))


def _smem_read(jaxpr: Any, eqn: Any, grid: tuple[int, ...], env: Env) -> np.ndarray | None:
    """``ref[i, j]`` of a known SMEM ref at every grid step (scalar indices only)."""
    import jax

    try:
        (indexer,) = jax.tree_util.tree_unflatten(eqn.params["tree"], eqn.invars[1:])
    except (ValueError, TypeError):
        return None
    table = np.asarray(env[eqn.invars[0]])
    parts = []
    for index in getattr(indexer, "indices", ()):
        if hasattr(index, "val"):
            parts.append(np.asarray(index.val))
        elif hasattr(index, "aval") and not np.shape(index.aval):
            found = grid_values(jaxpr, eqn, index, grid, env)
            if found is None:
                return None
            parts.append(found.astype(np.int64))
        else:
            return None  # a slice: not a scalar read
    if len(parts) != table.ndim:
        return None
    steps = math.prod(grid)
    return np.broadcast_to(
        table[tuple(np.clip(p, 0, n - 1) for p, n in zip(parts, table.shape, strict=True))],
        (steps,),
    )


def branch_masks(
    jaxpr: Any, eqn: Any, grid: tuple[int, ...], env: Env | None = None
) -> list[np.ndarray] | None:
    """The grid steps that take each branch of a ``cond`` whose index is computed from
    program ids and known values (``pl.when(k == 0)``), among the steps that reach it;
    None when the index is not known."""
    index = grid_values(jaxpr, eqn, eqn.invars[0], grid, env)
    if index is None:
        return None
    index = index.astype(np.int64)
    reach = _taken(env, len(index))
    return [reach & (index == b) for b in range(len(eqn.params["branches"]))]


def _mean_trips(jaxpr: Any, eqn: Any, grid: tuple[int, ...], env: Env | None) -> float | None:
    """The mean trip count over the grid of a ``fori_loop``-style ``while`` whose bounds the
    body computes from program ids and scalar-prefetch reads (paged attention's page loop)."""
    cond = eqn.params["cond_jaxpr"].jaxpr
    cn, bn = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
    if not grid or len(cond.eqns) != 1 or cond.eqns[0].primitive.name != "lt":
        return None
    consts, carries = eqn.invars[:cn], eqn.invars[cn + bn :]
    bounds = []
    for var in cond.eqns[0].invars:
        if hasattr(var, "val"):
            bounds.append(np.asarray(var.val, np.int64))
            continue
        where = cond.invars.index(var)
        outer = consts[where] if where < cn else carries[where - cn]
        if hasattr(outer, "val"):
            bounds.append(np.asarray(outer.val, np.int64))
            continue
        found = grid_values(jaxpr, eqn, outer, grid, env)
        if found is None:
            return None
        bounds.append(found.astype(np.int64))
    trips = np.broadcast_to(np.maximum(bounds[1] - bounds[0], 0), (math.prod(grid),))
    reach = _taken(env, len(trips))
    return float(trips[reach].mean()) if reach.any() else 0.0


def _carried(
    jaxpr: Any, eqn: Any, branch: Any, grid: tuple[int, ...], env: Env | None, taken: Any
) -> Env:
    """What is known of a ``cond`` branch's inputs (its operands after the index): SMEM
    tables and values at every grid step (program ids among them) carry into the branch,
    with the steps that take it (``taken``)."""
    carried: Env = {TAKEN: taken}
    for inner, outer in zip(branch.invars, eqn.invars[1:], strict=False):
        if (found := grid_values(jaxpr, eqn, outer, grid, env)) is not None:
            carried[inner] = found
    return carried
