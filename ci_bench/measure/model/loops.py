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

    from ci_bench.measure.model.stepcost import StepCost

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
    from ci_bench.measure.model.stepcost import StepCost

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
    return _with_the_rest(total, body, conds, cost, length, NOTE)


def _with_the_rest(
    total: StepCost,
    body: Any,
    conds: list[Any],
    cost: Callable[[Any], StepCost],
    iterations: int,
    note: str,
) -> StepCost:
    """``total`` (the conditionals' branches, as evaluated) plus the body's other work at
    every iteration; a loop whose conditionals copy is a pipeline: one step per iteration."""
    counted = {e.primitive.name for e in conds}  # the conds, and whiles simulated with them
    rest = cost(SimpleNamespace(eqns=[e for e in body.eqns if e.primitive.name not in counted]))
    total.add(rest, iterations)
    if any(_copies(c) for c in conds):  # charged as grid steps (body.step_cost: their waits)
        total.inner_steps += iterations
    if note not in total.notes:
        total.notes.append(note)
    return total


def _copies(eqn: Any) -> bool:
    """Whether a conditional (or a loop of them) waits on a DMA: a pipeline's guarded copy
    (emit_pipeline waits only where a block changed). A loop that starts its prefetch in a
    conditional and waits unconditionally (jax's paged attention) is not one: its copies'
    waits and round trips are charged (model revision 7)."""
    if eqn.primitive.name == "while":
        inner = eqn.params["body_jaxpr"].jaxpr.eqns
        return any(_copies(e) for e in inner if e.primitive.name in ("cond", "while"))
    return any(
        e.primitive.name == "dma_wait" or (e.primitive.name == "cond" and _copies(e))
        for branch in eqn.params["branches"]
        for e in branch.jaxpr.eqns
    )
