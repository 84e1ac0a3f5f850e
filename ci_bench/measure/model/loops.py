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
# Iterations of a compiled ``while`` at most (as many as a grid may have steps: calls.py).
MAX_WHILE_ITERATIONS = 4_194_304
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
    rest = cost(SimpleNamespace(eqns=[e for e in body.eqns if e.primitive.name != "cond"]))
    total.add(rest, iterations)
    if any(_copies(c) for c in conds):
        total.inner_steps += iterations
    if note not in total.notes:
        total.notes.append(note)
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


def _trace_scalars(
    jaxpr: Any, ins: list[Any], tables: dict[Any, Any], conds: list[Any] | None
) -> tuple[list[Any], list[Any]] | None:
    """``jaxpr``'s outputs (and each listed ``cond``'s index) from ``ins`` with jax ops, as
    traced values: integer scalar equations and scalar reads of known SMEM tables only
    (None where an output needs anything else); None when a listed index is unknown."""
    import jax.numpy as jnp
    from jax.extend import core as jcore

    env: dict[Any, Any] = {v: x for v, x in zip(jaxpr.invars, ins, strict=True) if x is not None}

    def read(atom: Any) -> Any:
        return jnp.asarray(atom.val) if isinstance(atom, jcore.Literal) else env.get(atom)

    indices = []
    for e in jaxpr.eqns:
        name = e.primitive.name
        if name == "cond":
            if conds is not None and e in conds:
                index = read(e.invars[0])
                if index is None:
                    return None
                indices.append(jnp.clip(index.astype(jnp.int32), 0, len(e.params["branches"]) - 1))
            continue
        if len(e.outvars) != 1 or _is_ref(e.outvars[0]) or np.shape(e.outvars[0].aval):
            continue
        args = [read(v) for v in e.invars]
        if name == "get":
            env[e.outvars[0]] = _get(e, read, tables)
        elif all(a is not None for a in args) and not any(_is_ref(v) for v in e.invars):
            try:
                out = e.primitive.bind(*args, **e.params)
                env[e.outvars[0]] = out[0] if e.primitive.multiple_results else out
            except Exception:  # a primitive that does not bind outside a kernel: unknown
                continue
    return [read(v) for v in jaxpr.outvars], indices


def _get(eqn: Any, read: Callable[[Any], Any], tables: dict[Any, Any]) -> Any:
    """``ref[i, ...]`` of a known SMEM table at scalar indices (clipped); None when not."""
    import jax
    import jax.numpy as jnp

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
        if value is None or getattr(value, "ndim", None) != 0:
            return None  # a slice, or an unknown index
        parts.append(value)
    if len(parts) != table.ndim:
        return None
    where = tuple(jnp.clip(p, 0, n - 1) for p, n in zip(parts, table.shape, strict=True))
    return table[where]


def simulate_while(
    eqn: Any, cost: Callable[[Any], StepCost], outer: dict[Any, Any]
) -> StepCost | None:
    """A ``while`` (``emit_pipeline`` over a grid read from SMEM: tokamax's grouped matmul)
    run on its integer scalars and the SMEM tables it reads (``outer``: the loop's operands
    whose values are known: scalars, or arrays for refs), compiled once with jax on the CPU:
    each ``cond`` in the body takes the branch its index says at every iteration; the rest
    of the body costs the same every iteration. None when the condition or a branch index
    cannot be computed, the body writes a table it reads, or the loop runs past
    ``MAX_WHILE_ITERATIONS``."""
    import jax
    import jax.numpy as jnp
    from jax.extend import core as jcore

    from ci_bench.measure.model.body import StepCost

    body, cond = eqn.params["body_jaxpr"].jaxpr, eqn.params["cond_jaxpr"].jaxpr
    cn, bn = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]

    def value(atom: Any) -> Any:
        return np.asarray(atom.val) if isinstance(atom, jcore.Literal) else outer.get(atom)

    cond_consts = [value(v) for v in eqn.invars[:cn]]
    body_consts = [value(v) for v in eqn.invars[cn : cn + bn]]
    carries = [value(v) for v in eqn.invars[cn + bn :]]
    refs = {i for i, v in enumerate(body.invars[:bn]) if _is_ref(v) and body_consts[i] is not None}
    written = {e.invars[0] for e in body.eqns if e.primitive.name in ("swap", "addupdate")}
    if written & {body.invars[i] for i in refs}:
        return None
    known = [i for i, c in enumerate(carries) if c is not None and not np.shape(c)]
    conds = [e for e in body.eqns if e.primitive.name == "cond"]
    if not known:
        return None

    def full(args: list[Any], carried: list[Any]) -> list[Any]:
        values: list[Any] = [None] * len(carries)
        for i, c in zip(known, carried, strict=True):
            values[i] = c
        return [*args, *values]

    def go(consts: list[Any], carried: list[Any]) -> Any:
        tables = {body.invars[i]: jnp.asarray(consts[i]) for i in refs}
        scalars = [None if i in refs or c is None else jnp.asarray(c) for i, c in enumerate(consts)]
        cond_ins = [None if c is None or np.shape(c) else jnp.asarray(c) for c in cond_consts]

        def keep_going(state: Any) -> Any:
            n, carried_, _ = state
            found = _trace_scalars(cond, full(cond_ins, carried_), {}, None)
            if found is None or found[0][0] is None:
                raise _UnknownError
            return jnp.logical_and(found[0][0], n < MAX_WHILE_ITERATIONS)

        def step(state: Any) -> Any:
            n, carried_, seen = state
            found = _trace_scalars(body, full(scalars, carried_), tables, conds)
            if found is None:
                raise _UnknownError
            outs, indices = found
            new = [outs[i] for i in known]
            if any(x is None for x in new):
                raise _UnknownError
            new = [x.astype(c.dtype) for x, c in zip(new, carried_, strict=True)]
            if indices:
                hit = jnp.stack(indices)[:, None] == jnp.arange(seen.shape[1])[None, :]
                seen = seen + hit.astype(jnp.int32)
            return n + 1, new, seen

        width = max((len(e.params["branches"]) for e in conds), default=1)
        seen = jnp.zeros((len(conds), width), jnp.int32)
        return jax.lax.while_loop(keep_going, step, (jnp.int32(0), carried, seen))

    start = [jnp.asarray(carries[i]) for i in known]
    try:
        with jax.default_device(jax.devices("cpu")[0]):
            args = (_arrays(body_consts), start)
            # The loop is small scalar code run once: XLA's cheapest compile is the fastest.
            options = {
                "xla_backend_optimization_level": 0,
                "xla_llvm_disable_expensive_passes": True,
            }
            trips, _, seen = jax.jit(go).lower(*args).compile(options)(*args)
    except _UnknownError:
        return None
    trips, seen = int(trips), np.asarray(seen)
    if trips >= MAX_WHILE_ITERATIONS:
        return None
    total = StepCost()
    for k, e in enumerate(conds):
        for which, count in enumerate(seen[k]):
            if count:
                total.add(cost(e.params["branches"][which].jaxpr), int(count))
    return _with_the_rest(total, body, conds, cost, trips, WHILE_NOTE)


class _UnknownError(Exception):
    """A loop's condition, carry or branch index needs a value the model does not know."""


def _arrays(consts: list[Any]) -> list[Any]:
    """The loop's constants as jit arguments (unknown ones as None, a static leaf)."""
    return [None if c is None else np.asarray(c) for c in consts]
