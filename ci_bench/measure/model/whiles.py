"""A ``while`` in a kernel body sized at run time, run on the integers it computes and the
SMEM tables it reads (scalar prefetch: the case's own inputs), compiled once with jax on the
CPU: ``emit_pipeline`` over a grid read from SMEM (tokamax's grouped matmul) is one, and so
is a lookahead pipeline's fetch loop nested in it (``pl.Buffered(n, use_lookahead=True)``).
Each conditional takes the branch its index says at every iteration and is counted there;
the rest of a body costs the same every iteration. A body that computes anything it needs
from an unknown value gives up (the caller says "dynamic trip count").
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from ci_bench.measure.model.loops import _with_the_rest

if TYPE_CHECKING:
    from collections.abc import Callable

    from ci_bench.measure.model.stepcost import StepCost

# Iterations of a compiled ``while`` at most (as many as a grid may have steps: calls.py).
MAX_WHILE_ITERATIONS = 4_194_304


WHILE_NOTE = (
    "a pipeline sized at run time (a while over a trip count read from SMEM) evaluated at "
    "every iteration from the case's inputs"
)


def _is_ref(atom: Any) -> bool:
    return "Ref" in type(getattr(atom, "aval", None)).__name__


@dataclass(frozen=True)
class _Rows:
    """Where a loop's counters go: a row per ``cond`` (a column per branch) and per nested
    ``while`` (its trips, column 0), at every depth of nested ``while`` bodies."""

    at: dict[int, int]  # id(eqn) -> row
    width: int

    @property
    def shape(self) -> tuple[int, int]:
        return (max(len(self.at), 1), self.width)


def _rows(body: Any) -> tuple[_Rows, list[Any]]:
    """The counters of ``body``'s conds and nested whiles (into while bodies, not into
    branches, which are costed whole), and those equations in row order."""
    found: list[Any] = []

    def visit(jaxpr: Any) -> None:
        for e in jaxpr.eqns:
            if e.primitive.name == "cond":
                found.append(e)
            elif e.primitive.name == "while":
                found.append(e)
                visit(e.params["body_jaxpr"].jaxpr)

    visit(body)
    width = max((len(e.params["branches"]) for e in found if "branches" in e.params), default=1)
    return _Rows({id(e): row for row, e in enumerate(found)}, width), found


def _trace_scalars(
    jaxpr: Any,
    ins: list[Any],
    tables: dict[Any, Any],
    rows: _Rows | None,
    known: dict[Any, Any] | None = None,
) -> tuple[list[Any], Any] | None:
    """``jaxpr``'s outputs from ``ins`` with jax ops, as traced values (integer scalar
    equations, scalar reads of known SMEM tables and nested ``while`` loops only; None
    where an output needs anything else), and with ``rows`` the counts of each listed
    cond's branch and each nested while's trips in this execution (``known``: values of
    other variables, a run_scoped body's constvars); None when a listed branch index or a
    nested loop's condition is unknown."""
    import jax.numpy as jnp
    from jax.extend import core as jcore

    env: dict[Any, Any] = dict(known or {})
    env.update({v: x for v, x in zip(jaxpr.invars, ins, strict=True) if x is not None})

    def read(atom: Any) -> Any:
        return jnp.asarray(atom.val) if isinstance(atom, jcore.Literal) else env.get(atom)

    hits = jnp.zeros(rows.shape, jnp.int32) if rows is not None else None
    for e in jaxpr.eqns:
        name = e.primitive.name
        listed = rows is not None and id(e) in rows.at
        if name == "cond":
            if listed:
                index = read(e.invars[0])
                if index is None:
                    return None
                which = jnp.clip(index.astype(jnp.int32), 0, len(e.params["branches"]) - 1)
                hits = hits.at[rows.at[id(e)], which].add(1)
            continue
        if name == "while" and listed:
            inner = _run_while(e, [read(v) for v in e.invars], tables, rows)
            if inner is None:
                return None
            outs, more, _ = inner
            env.update({v: x for v, x in zip(e.outvars, outs, strict=True) if x is not None})
            hits = hits + more
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
    return [read(v) for v in jaxpr.outvars], hits


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


def _run_while(
    eqn: Any, ins: list[Any], tables: dict[Any, Any], rows: _Rows
) -> tuple[list[Any], Any, Any] | None:
    """A ``while`` run as a traced ``lax.while_loop`` over its known scalar carries (the
    rest stay unknown): its outputs and its counters (``rows``), its own trips included;
    raises ``_UnknownError`` when its condition needs an unknown value."""
    import jax
    import jax.numpy as jnp

    body, cond = eqn.params["body_jaxpr"].jaxpr, eqn.params["cond_jaxpr"].jaxpr
    cn, bn = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
    outer_cond, outer_body = eqn.invars[:cn], eqn.invars[cn : cn + bn]
    cond_tables = {cond.invars[i]: tables[v] for i, v in enumerate(outer_cond) if v in tables}
    body_tables = {body.invars[i]: tables[v] for i, v in enumerate(outer_body) if v in tables}
    cond_ins, body_ins, carries = ins[:cn], ins[cn : cn + bn], ins[cn + bn :]
    known = [i for i, c in enumerate(carries) if c is not None and not np.shape(c)]
    if not known:
        return None

    def full(args: list[Any], carried: list[Any]) -> list[Any]:
        values: list[Any] = [None] * len(carries)
        for i, c in zip(known, carried, strict=True):
            values[i] = c
        return [*args, *values]

    def keep_going(state: Any) -> Any:
        n, carried, _ = state
        found = _trace_scalars(cond, full(cond_ins, carried), cond_tables, None)
        if found is None or found[0][0] is None:
            raise _UnknownError
        return jnp.logical_and(found[0][0], n < MAX_WHILE_ITERATIONS)

    def step(state: Any) -> Any:
        n, carried, hits = state
        found = _trace_scalars(body, full(body_ins, carried), body_tables, rows)
        if found is None:
            raise _UnknownError
        outs, more = found
        new = [outs[i] for i in known]
        if any(x is None for x in new):
            raise _UnknownError
        new = [jnp.asarray(x).astype(c.dtype) for x, c in zip(new, carried, strict=True)]
        return n + 1, new, hits + more

    start = [jnp.asarray(carries[i]) for i in known]
    zeros = jnp.zeros(rows.shape, jnp.int32)
    trips, carried, hits = jax.lax.while_loop(keep_going, step, (jnp.int32(0), start, zeros))
    if id(eqn) in rows.at:
        hits = hits.at[rows.at[id(eqn)], 0].add(trips)
    outs: list[Any] = [None] * len(carries)
    for i, c in zip(known, carried, strict=True):
        outs[i] = c
    return outs, hits, trips


def simulate_while(
    eqn: Any, cost: Callable[[Any], StepCost], outer: dict[Any, Any]
) -> StepCost | None:
    """A ``while`` (``emit_pipeline`` over a grid read from SMEM: tokamax's grouped matmul)
    run on its integer scalars and the SMEM tables it reads (``outer``: the loop's operands
    whose values are known: scalars, or arrays for refs), compiled once with jax on the CPU:
    each ``cond`` in the body takes the branch its index says at every iteration, and a
    ``while`` nested in the body (a lookahead pipeline's fetch loop, ``pl.Buffered(n,
    use_lookahead=True)``) runs as its own loop with its conditionals counted the same way;
    the rest of each body costs the same every iteration. None when a condition or a branch
    index cannot be computed, a body writes a table it reads, or a loop runs past
    ``MAX_WHILE_ITERATIONS``."""
    import jax.numpy as jnp
    from jax.extend import core as jcore

    body = eqn.params["body_jaxpr"].jaxpr
    rows, listed = _rows(body)
    tables = [np.asarray(outer[v]) if _is_ref(v) and v in outer else None for v in eqn.invars]
    loops = [e for e in listed if e.primitive.name == "while"]
    bodies = [body, *(loop.params["body_jaxpr"].jaxpr for loop in loops)]
    written = {
        e.invars[0] for b in bodies for e in b.eqns if e.primitive.name in ("swap", "addupdate")
    }
    cn, bn = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
    read_tables = {body.invars[i - cn] for i in range(cn, cn + bn) if tables[i] is not None}
    if written & read_tables:
        return None

    def value(atom: Any) -> Any:
        if isinstance(atom, jcore.Literal):
            return np.asarray(atom.val)
        return None if _is_ref(atom) else outer.get(atom)

    scalars = [value(v) for v in eqn.invars]

    def go(ins: list[Any], known_tables: list[Any]) -> Any:
        pairs = zip(eqn.invars, known_tables, strict=True)
        given = {v: jnp.asarray(t) for v, t in pairs if t is not None}
        found = _run_while(eqn, [None if x is None else jnp.asarray(x) for x in ins], given, rows)
        if found is None:
            raise _UnknownError
        return found[1], found[2]

    try:
        hits, trips = _compiled(go, _arrays(scalars), _arrays(tables))
    except _UnknownError:
        return None
    trips, hits = int(trips), np.asarray(hits)
    if trips >= MAX_WHILE_ITERATIONS:
        return None
    total = _counted(listed, hits, cost)
    counted = [e for e in body.eqns if e.primitive.name in ("cond", "while")]
    return _with_the_rest(total, body, counted, cost, trips, WHILE_NOTE)


def _counted(listed: list[Any], hits: np.ndarray, cost: Callable[[Any], StepCost]) -> StepCost:
    """The conditionals' branches at the times each was taken, and each nested loop's other
    work at its trips."""
    from ci_bench.measure.model.stepcost import StepCost

    total = StepCost()
    for row, e in enumerate(listed):
        if e.primitive.name == "while":
            inner = e.params["body_jaxpr"].jaxpr
            loop_rest = [x for x in inner.eqns if x.primitive.name not in ("cond", "while")]
            if int(hits[row, 0]):
                total.add(cost(SimpleNamespace(eqns=loop_rest)), int(hits[row, 0]))
            continue
        for which, count in enumerate(hits[row]):
            if count:
                total.add(cost(e.params["branches"][which].jaxpr), int(count))
    return total


def _waits(eqn: Any) -> bool:
    """Whether a loop waits on DMAs (a pipeline's step), not only starts them (a lookahead
    fetch loop)."""

    def inside(jaxpr: Any) -> bool:
        return any(
            e.primitive.name == "dma_wait"
            or (e.primitive.name == "cond" and any(inside(b.jaxpr) for b in e.params["branches"]))
            for e in jaxpr.eqns
        )

    return inside(eqn.params["body_jaxpr"].jaxpr)


BLOCK_NOTE = (
    "pipelines sized at run time and their lookahead fetch loops run once as a whole from "
    "the case's inputs (each conditional counted at the iterations that take it)"
)


def simulate_block(
    jaxpr: Any, cost: Callable[[Any], StepCost], env: dict[Any, Any]
) -> StepCost | None:
    """A body (or a branch of one) whose loops are sized at run time and feed each other (a
    lookahead pipeline's prologue fetch loops hand the main loop its carries), run once as a
    whole on its integer scalars and the SMEM tables ``env`` knows (values at every grid
    step, the same at all of them): every conditional and loop counted at the times it runs,
    the rest once; each loop that waits on its copies is a pipeline, one step per
    iteration. None when anything it needs is unknown."""
    import jax.numpy as jnp

    if not env or not any(e.primitive.name == "while" for e in jaxpr.eqns):
        return None
    rows, listed = _rows(jaxpr)
    names, values = [], []
    for var in [*jaxpr.constvars, *jaxpr.invars]:
        if var not in env:
            continue
        found = np.asarray(env[var])
        if not _is_ref(var):
            if found.ndim != 1 or not len(found) or np.any(found != found[0]):
                continue
            found = found[0]
        names.append(var)
        values.append(found)
    bodies = [jaxpr, *(e.params["body_jaxpr"].jaxpr for e in listed if "body_jaxpr" in e.params)]
    written = {
        e.invars[0] for b in bodies for e in b.eqns if e.primitive.name in ("swap", "addupdate")
    }
    if written & {v for v in names if _is_ref(v)}:
        return None

    def go(given: list[Any]) -> Any:
        known = {v: jnp.asarray(x) for v, x in zip(names, given, strict=True)}
        tables = {v: x for v, x in known.items() if _is_ref(v)}
        scalars = {v: x for v, x in known.items() if not _is_ref(v)}
        found = _trace_scalars(jaxpr, [None] * len(jaxpr.invars), tables, rows, scalars)
        if found is None:
            raise _UnknownError
        return found[1]

    try:
        hits = np.asarray(_compiled(go, [np.asarray(x) for x in values]))
    except _UnknownError:
        return None
    top = {id(e) for e in jaxpr.eqns}  # identity: two equal equations are two loops
    loops = [(row, e) for row, e in enumerate(listed) if id(e) in top and "body_jaxpr" in e.params]
    if any(hits[row, 0] >= MAX_WHILE_ITERATIONS for row, _ in loops):
        return None
    total = _counted(listed, hits, cost)
    rest = [e for e in jaxpr.eqns if e.primitive.name not in ("cond", "while")]
    total.add(cost(SimpleNamespace(eqns=rest)))
    total.inner_steps += sum(int(hits[row, 0]) for row, e in loops if _waits(e))
    total.notes.append(BLOCK_NOTE)
    return total


def _compiled(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` jitted on the CPU with XLA's cheapest compile (small scalar code, run
    once: compiling is most of its time)."""
    import jax

    with jax.default_device(jax.devices("cpu")[0]):
        options = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
        return jax.jit(fn).lower(*args).compile(options)(*args)


class _UnknownError(Exception):
    """A loop's condition, carry or branch index needs a value the model does not know."""


def _arrays(consts: list[Any]) -> list[Any]:
    """The loop's constants as jit arguments (unknown ones as None, a static leaf)."""
    return [None if c is None else np.asarray(c) for c in consts]
