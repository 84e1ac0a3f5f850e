"""A ``scan`` in a kernel body whose conditionals depend only on integers the loop computes,
evaluated iteration by iteration: ``emit_pipeline``'s inner loop is one (each operand's
"did the block index change?" test guards its copy), so its copies are counted at the
iterations that make them, not at every iteration.

The loop's integer scalars (its carries, its constants when they are literals, everything
computed from them) are run in numpy; each ``cond`` takes the branch its index says and
adds that branch's cost. Anything else in the body (ref reads, dots, DMAs outside a
conditional) costs the same every iteration and is counted once times the length. A
predicate that reads anything unknown (a ref, a program id from outside) gives up: the
caller falls back to the costliest branch at every iteration.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from ci_bench.measure.model.indexmap import _BINARY, _UNARY

if TYPE_CHECKING:
    from collections.abc import Callable

    from ci_bench.measure.model.body import StepCost

# Iterations simulated in Python at most (past it: the costliest-branch bound).
MAX_ITERATIONS = 100_000
NOTE = "a loop's conditionals (emit_pipeline's copies) evaluated at every iteration"
# A loop whose conditionals start DMAs is a pipeline (emit_pipeline): each iteration is
# charged the per-step overhead of a grid step (``StepCost.inner_steps``), an assumption:
# it does the same work (DMA issue, semaphore waits, index bookkeeping) on the scalar core.


def _scalar(eqn: Any, ins: list[Any]) -> Any:
    name = eqn.primitive.name
    if any(x is None or np.ndim(x) != 0 for x in ins):
        return None
    if name in _BINARY:
        return _BINARY[name](*ins)
    if name in _UNARY:
        return _UNARY[name](*ins)
    if name == "convert_element_type":
        return np.asarray(ins[0]).astype(np.dtype(eqn.params["new_dtype"]))
    if name == "select_n":
        return ins[1:][int(ins[0])]
    return None


def simulate_scan(
    eqn: Any, cost: Callable[[Any], StepCost], outer: dict[Any, Any] | None = None
) -> StepCost | None:
    """The scan's cost with each conditional counted at the iterations that take each
    branch (``outer``: values of the scan's non-literal inputs, e.g. from program ids);
    None when a conditional's index cannot be computed (or the loop is too long)."""
    from jax.extend import core as jcore

    closed = eqn.params["jaxpr"]
    body = closed.jaxpr
    length = int(eqn.params["length"])
    n_consts, n_carry = eqn.params["num_consts"], eqn.params["num_carry"]
    conds = [e for e in body.eqns if e.primitive.name == "cond"]
    if not conds or length > MAX_ITERATIONS:
        return None

    given = outer or {}

    def value(atom: Any) -> Any:
        return np.asarray(atom.val) if isinstance(atom, jcore.Literal) else given.get(atom)

    consts = [value(v) for v in eqn.invars[:n_consts]]
    carries = [value(v) for v in eqn.invars[n_consts : n_consts + n_carry]]
    branch_costs: dict[tuple[int, int], StepCost] = {}
    from ci_bench.measure.model.body import StepCost

    total = StepCost()
    for _ in range(length):
        env: dict[Any, Any] = dict(zip(body.constvars, map(np.asarray, closed.consts), strict=True))
        env.update(zip(body.invars[:n_consts], consts, strict=True))
        env.update(zip(body.invars[n_consts : n_consts + n_carry], carries, strict=True))

        def read(atom: Any, env: dict[Any, Any] = env) -> Any:
            return np.asarray(atom.val) if isinstance(atom, jcore.Literal) else env.get(atom)

        for e in body.eqns:
            if e.primitive.name == "cond":
                index = read(e.invars[0])
                if index is None:
                    return None
                which = int(np.clip(int(index), 0, len(e.params["branches"]) - 1))
                key = (id(e), which)
                if key not in branch_costs:
                    branch_costs[key] = cost(e.params["branches"][which].jaxpr)
                total.add(branch_costs[key])
                continue
            if len(e.outvars) == 1:
                env[e.outvars[0]] = _scalar(e, [read(v) for v in e.invars])
        carries = [read(v) for v in body.outvars[:n_carry]]
    rest = cost(SimpleNamespace(eqns=[e for e in body.eqns if e.primitive.name != "cond"]))
    total.add(rest, length)
    if any(_copies(c) for c in conds):  # a pipeline: each iteration is a step of its own
        total.inner_steps += length
    if NOTE not in total.notes:
        total.notes.append(NOTE)
    return total


def _copies(eqn: Any) -> bool:
    """Whether a conditional starts a DMA (a pipeline's guarded copy)."""
    return any(
        e.primitive.name == "dma_start" or (e.primitive.name == "cond" and _copies(e))
        for branch in eqn.params["branches"]
        for e in branch.jaxpr.eqns
    )


WHILE_NOTE = (
    "a pipeline sized at run time (a while over a trip count read from SMEM) evaluated at "
    "every iteration from the case's inputs"
)


def _is_ref(atom: Any) -> bool:
    return "Ref" in type(getattr(atom, "aval", None)).__name__


def _get(eqn: Any, read: Callable[[Any], Any], tables: dict[Any, np.ndarray]) -> Any:
    """``ref[i, ...]`` of a known SMEM table at scalar indices; None when not one."""
    import jax

    table = tables.get(eqn.invars[0])
    if table is None:
        return None
    try:
        (indexer,) = jax.tree_util.tree_unflatten(eqn.params["tree"], eqn.invars[1:])
    except (ValueError, TypeError):
        return None
    parts = []
    for index in getattr(indexer, "indices", ()):
        value = read(index) if hasattr(index, "aval") else None
        if value is None or np.ndim(value) != 0:
            return None  # a slice, or an unknown index
        parts.append(int(value))
    if len(parts) != table.ndim:
        return None
    return table[tuple(min(max(p, 0), n - 1) for p, n in zip(parts, table.shape, strict=True))]


def simulate_while(
    eqn: Any, cost: Callable[[Any], StepCost], outer: dict[Any, Any]
) -> StepCost | None:
    """A ``while`` (``emit_pipeline`` over a grid read from SMEM: tokamax's grouped matmul)
    run iteration by iteration on its integer scalars and the SMEM tables it reads
    (``outer``: the loop's operands whose values are known: scalars, or arrays for refs).
    Each ``cond`` in the body takes the branch its index says; the rest of the body costs
    the same every iteration. None when the condition or a branch index cannot be computed,
    the body writes a table it reads, or the loop runs past ``MAX_ITERATIONS``."""
    from jax.extend import core as jcore

    from ci_bench.measure.model.body import StepCost

    body_closed, cond_closed = eqn.params["body_jaxpr"], eqn.params["cond_jaxpr"]
    body, cond = body_closed.jaxpr, cond_closed.jaxpr
    cn, bn = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]

    def value(atom: Any) -> Any:
        return np.asarray(atom.val) if isinstance(atom, jcore.Literal) else outer.get(atom)

    cond_consts = [value(v) for v in eqn.invars[:cn]]
    body_consts = [value(v) for v in eqn.invars[cn : cn + bn]]
    carries = [value(v) for v in eqn.invars[cn + bn :]]
    tables = {
        inner: np.asarray(x)
        for inner, x in zip(body.invars[:bn], body_consts, strict=True)
        if _is_ref(inner) and x is not None
    }
    written = {e.invars[0] for e in body.eqns if e.primitive.name in ("swap", "addupdate")}
    if written & set(tables):
        return None
    branch_costs: dict[tuple[int, int], StepCost] = {}
    total = StepCost()
    conds = [e for e in body.eqns if e.primitive.name == "cond"]

    def run(jaxpr: Any, consts: list[Any], args: list[Any], simulate: bool) -> list[Any] | None:
        env: dict[Any, Any] = dict(zip(jaxpr.invars, [*consts, *args], strict=True))

        def read(atom: Any) -> Any:
            return np.asarray(atom.val) if isinstance(atom, jcore.Literal) else env.get(atom)

        for e in jaxpr.eqns:
            name = e.primitive.name
            if name == "cond" and simulate:
                index = read(e.invars[0])
                if index is None:
                    return None
                which = int(np.clip(int(index), 0, len(e.params["branches"]) - 1))
                key = (id(e), which)
                if key not in branch_costs:
                    branch_costs[key] = cost(e.params["branches"][which].jaxpr)
                total.add(branch_costs[key])
            elif name == "get" and len(e.outvars) == 1:
                env[e.outvars[0]] = _get(e, read, tables)
            elif len(e.outvars) == 1 and not _is_ref(e.outvars[0]):
                env[e.outvars[0]] = _scalar(e, [read(v) for v in e.invars])
        return [read(v) for v in jaxpr.outvars]

    trips = 0
    while True:
        go = run(cond, cond_consts, carries, simulate=False)
        if go is None or go[0] is None:
            return None
        if not bool(go[0]):
            break
        trips += 1
        if trips > MAX_ITERATIONS:
            return None
        carries_ = run(body, body_consts, carries, simulate=True)
        if carries_ is None:
            return None
        carries = carries_
    rest = cost(SimpleNamespace(eqns=[e for e in body.eqns if e.primitive.name != "cond"]))
    total.add(rest, trips)
    if any(_copies(c) for c in conds):  # a pipeline: each iteration is a step of its own
        total.inner_steps += trips
    if WHILE_NOTE not in total.notes:
        total.notes.append(WHILE_NOTE)
    return total
