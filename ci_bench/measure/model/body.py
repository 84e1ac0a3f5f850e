"""What one grid step of a Pallas kernel body costs: MXU FLOPs, vector work, manual DMAs.

The body is a jaxpr over refs. Every ``dot_general`` is ``2 x prod(output) x prod(contracted
dims)`` FLOPs; a ``cond`` (``pl.when``) counts its costliest branch and says so; ``scan``
multiplies its body by its length, a ``while`` by its trip count when the loop is a
``fori_loop`` with literal bounds; anything else is listed as not modelled, never counted as
zero. ``dma_start`` on a ref in ``ANY``/``HBM`` memory (``pltpu.async_copy``/``sync_copy``)
moves the bytes of its (statically sliced) destination. ``run_scoped`` allocations add to
the step's VMEM. Every other equation's vector and transcendental work is counted in vreg
operations (vector.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ci_bench.measure.model.dma import dma_cost, memory_space, outer_semaphore, semaphore
from ci_bench.measure.model.gridvalues import (
    TAKEN,
    Env,
    _carried,
    _mean_trips,
    _taken,
    branch_masks,
    grid_values,
)
from ci_bench.measure.model.jaxpr_read import dot_dims, fori_trip_count, padded_bytes, sub_jaxprs
from ci_bench.measure.model.stepcost import _VECTOR_FIELDS, StepCost

# A float32 dot's MXU time in bf16 passes, by operands and precision (model revision 5).
# TPUs have no float32 MXU; how Mosaic feeds float32 operands to it is libtpu's, so these are
# measured: a 4096³ dot in 512³ tiles on a TPU v5e, device time against the same dot in
# bfloat16 (benchmarks/tpu_microbench.py, benchmarks/data/tpu_v5e_microbench_2026-12-06.json):
# float32 x float32 1.53x at DEFAULT and 4.31x at HIGHEST, float32 x bfloat16 1.22x at
# DEFAULT. Mosaic refuses HIGH ("Unsupported dot precision"): it keeps XLA's 3 passes.
_F32_PASSES = {
    ("float32", "DEFAULT"): 1.53,
    ("float32", "HIGH"): 3.0,
    ("float32", "HIGHEST"): 4.31,
    ("mixed", "DEFAULT"): 1.22,
    ("mixed", "HIGH"): 3.0,
    ("mixed", "HIGHEST"): 4.31,
}


MXU_PADDING_NOTE = "dots narrower than the MXU: charged at the array's width (k and n padded to it)"
VECTOR_NOTE = "vector work not timed (an operation the vector table does not know): "


def _vector_cost(eqn: Any) -> StepCost:
    from ci_bench.measure.model.vector import work

    found = work(eqn)
    if found is None:
        return StepCost(notes=[VECTOR_NOTE + eqn.primitive.name])
    return StepCost(**dict(zip(_VECTOR_FIELDS, found, strict=True)))


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def mxu_flops(m: int, k: int, n: int, batch: int, columns: int) -> int:
    """FLOPs a dot occupies the MXU for: a systolic array of ``columns`` x ``columns`` holds
    a (k, n) tile of the right operand and streams the left one 8 rows at a time (the scaling
    book, "How to Think About TPUs"; jax's chip table: ``mxu_column_size``), so k and n are
    padded to the array and m to 8 sublanes: a 64-wide head dim fills a 256-wide array to a
    quarter, and costs the time of the whole."""
    return 2 * batch * _round_up(m, 8) * _round_up(k, columns) * _round_up(n, columns)


def _dot_cost(eqn: Any) -> StepCost:
    lhs, rhs = (v.aval for v in eqn.invars[:2])
    batch, m, k, n = dot_dims(eqn)
    flops = 2 * math.prod(eqn.outvars[0].aval.shape) * k
    narrow, wide = (mxu_flops(m, k, n, batch, c) for c in (128, 256))
    cost = StepCost(flops=flops)
    dtypes = {np.dtype(lhs.dtype).name, np.dtype(rhs.dtype).name}
    if dtypes <= {"int8", "uint8", "int4", "uint4"}:
        cost.int8_flops, cost.int8_flops_wide = float(narrow), float(wide)
    elif "float32" in dtypes:
        operands = "float32" if dtypes == {"float32"} else "mixed"
        precision = _precision_name(eqn.params.get("precision"))
        passes = _F32_PASSES[operands, precision]
        cost.bf16_flops, cost.bf16_flops_wide = float(narrow * passes), float(wide * passes)
        pair = "float32 x float32" if operands == "float32" else "float32 x bfloat16"
        cost.notes.append(
            f"{pair} dots at {precision} cost {passes:g} bf16 MXU passes (measured, v5e)"
        )
    else:
        cost.bf16_flops, cost.bf16_flops_wide = float(narrow), float(wide)
    if not dtypes & {"int8", "uint8", "int4", "uint4"}:
        cost.vpu_ops, cost.vpu_ops_packed = (_accumulated(m, k, n, batch, c) for c in (128, 256))
    if wide > flops:
        cost.notes.append(MXU_PADDING_NOTE)
    return cost


def _accumulated(m: int, k: int, n: int, batch: int, depth: int) -> float:
    """VALU operations summing a float dot's partial products: the MXU's result for each
    ``depth`` of k is popped and added to the rest, one op per float32 vreg of the result
    after the first: libtpu's v5e bundles issue exactly that for float32 operands and up to
    2x it for bfloat16 ones (``benchmarks/tpu_vector_ops.py``, its dots); a v6e's 256-deep
    MXU halves them (``--chip v6e``). The 256-deep count rides on the packed vector count:
    the chips whose VPU computes bf16 are the ones with a 256-wide MXU (a test holds the
    table to it). int8 dots are unmeasured and count none."""
    from ci_bench.measure.model.vector import vregs

    return float(batch * vregs((m, n), 4, False) * (-(-k // depth) - 1))


def _precision_name(precision: Any) -> str:
    """'DEFAULT', 'HIGH' or 'HIGHEST' of a dot's precision (the stronger of a pair)."""
    items = precision if isinstance(precision, tuple) else (precision,)
    order = ["DEFAULT", "HIGH", "HIGHEST"]
    names = [str(getattr(p, "name", p)).upper() for p in items if p is not None]
    known = [n.replace("PRECISION.", "") for n in names]
    known = [n for n in known if n in order]
    return max(known, key=order.index) if known else "DEFAULT"


def _scan_over_grid(
    jaxpr: Any, eqn: Any, grid: tuple[int, ...], env: Env | None = None
) -> StepCost | None:
    """A body ``scan`` whose constants come from program ids (an ``emit_pipeline`` nested in
    a gridded call): simulated once per distinct set of constants, weighted by its steps."""
    from ci_bench.measure.model.loops import simulate_scan

    n = eqn.params["num_consts"]
    columns = {v: grid_values(jaxpr, eqn, v, grid, env) for v in eqn.invars[:n]}
    known = {v: c for v, c in columns.items() if c is not None}
    if not known:
        return None
    table = np.stack([c.astype(np.int64) for c in known.values()], axis=1)
    table = table[_taken(env, len(table))]
    if not len(table):
        return StepCost()
    combos, counts = np.unique(table, axis=0, return_counts=True)
    total = StepCost()
    for combo, count in zip(combos, counts, strict=True):
        outer = {v: np.asarray(x) for v, x in zip(known, combo, strict=True)}
        cost = simulate_scan(eqn, step_cost, outer)
        if cost is None:
            return None
        total.add_share(cost, float(count) / len(table))
    return total


def _simulated_while(
    jaxpr: Any, eqn: Any, grid: tuple[int, ...], env: Env | None
) -> StepCost | None:
    """A ``while`` whose bounds and conditionals the loop computes from values known at
    every grid step and the same at all of them (a grid-less call's SMEM operands:
    tokamax's ``emit_pipeline`` over a grid read from SMEM), run iteration by iteration."""
    from ci_bench.measure.model.whiles import _is_ref, simulate_while

    if not env:
        return None
    outer: dict[Any, Any] = {}
    for var in eqn.invars:
        if hasattr(var, "val") or (found := grid_values(jaxpr, eqn, var, grid, env)) is None:
            continue
        if _is_ref(var):
            outer[var] = np.asarray(found)
        elif np.ndim(found) == 1 and len(found) and np.all(found == found[0]):
            outer[var] = np.asarray(found[0])
    return simulate_while(eqn, step_cost, outer)


def step_cost(jaxpr: Any, grid: tuple[int, ...] = (), env: Env | None = None) -> StepCost:
    """The costs of one execution of ``jaxpr`` (a kernel body, or part of one); with the
    call's ``grid``, a ``cond`` on program ids counts each branch at the steps it runs (an
    init ``pl.when(k == 0)`` and an accumulate ``pl.when(k > 0)`` are one dot per step).
    Loops it cannot size one by one are run as a whole when ``env`` knows what they need
    (a lookahead pipeline: ``whiles.simulate_block``)."""
    total = _step_cost(jaxpr, grid, env)
    if not _read_whole(total) and env:
        from ci_bench.measure.model.whiles import simulate_block

        whole = simulate_block(jaxpr, step_cost, env)
        if whole is not None and _read_whole(whole):
            total = whole
    if total.inner_steps:  # a pipeline's (emit_pipeline) waits: charged as its steps are
        total.dma_waits = total.wait_rounds = 0.0
    return total


def _read_whole(cost: StepCost) -> bool:
    """Whether the walk read every part (nothing left unknown)."""
    return not cost.not_modelled


def _step_cost(jaxpr: Any, grid: tuple[int, ...], env: Env | None) -> StepCost:
    """``step_cost``, one equation at a time. A copy waited on with no work issued since it
    started is exposed (``StepCost.exposed_dma_bytes``); one started in a conditional after
    the branch's work is followed into the body around it."""
    walk = _Walk(jaxpr, grid, env)
    for eqn in jaxpr.eqns:
        _HANDLERS.get(eqn.primitive.name, _other)(walk, eqn)
    total = walk.total
    total.tail_copies = {k: b for k, (b, at) in walk.started.items() if total.work() == at}
    total.wait_rounds += walk.waited
    return total


@dataclass
class _Walk:
    """A body walk in progress: the grid and known values its equations are read against,
    what they cost so far, and the copies started and not yet waited on (their semaphore ->
    bytes, and the work issued when they started: a wait with none since is exposed)."""

    jaxpr: Any
    grid: tuple[int, ...]
    env: Env | None
    total: StepCost = field(default_factory=StepCost)
    started: dict[tuple, tuple[float, float]] = field(default_factory=dict)
    waited: bool = False  # a copy was waited on here (not in a nested walk): one round

    def note(self, note: str) -> None:
        """A note on the whole body, said once."""
        if note not in self.total.notes:
            self.total.notes.append(note)


def _dot(walk: _Walk, eqn: Any) -> None:
    walk.total.add(_dot_cost(eqn))


def _dma_start(walk: _Walk, eqn: Any) -> None:
    """A copy's bytes, and when it started (a wait with no work since then is exposed)."""
    copy = dma_cost(eqn)
    walk.total.add(copy)
    if (key := semaphore(eqn)) is not None:
        walk.started[key] = (copy.dma_read_bytes + copy.dma_write_bytes, walk.total.work())


def _dma_wait(walk: _Walk, eqn: Any) -> None:
    """A wait: one more for the scalar core; for a copy no work was issued behind, its
    bytes are exposed."""
    walk.total.dma_waits += 1
    walk.waited = True
    key = semaphore(eqn)
    copy = walk.started.pop(key, None) if key is not None else None
    if copy is not None and walk.total.work() == copy[1]:
        walk.total.exposed_dma_bytes += copy[0]


def _cond(walk: _Walk, eqn: Any) -> None:
    """A conditional: on program ids, each branch at the steps it runs; else the costliest."""
    masks = branch_masks(walk.jaxpr, eqn, walk.grid, walk.env)
    if masks is not None:
        _cond_on_grid(walk, eqn, masks)
    else:
        _cond_costliest(walk, eqn)


def _cond_on_grid(walk: _Walk, eqn: Any, masks: list[np.ndarray]) -> None:
    """Each branch's mean cost over the steps that reach it; the copies a branch leaves in
    flight are followed in the body around it, weighted alike."""
    total, grid = walk.total, walk.grid
    reach = max(int(sum(m.sum() for m in masks)), 1)
    tails: dict[tuple, float] = {}
    for mask, branch in zip(masks, eqn.params["branches"], strict=True):
        if not mask.any():
            continue
        known = _carried(walk.jaxpr, eqn, branch.jaxpr, grid, walk.env, mask)
        cost = step_cost(branch.jaxpr, grid, known)
        share = float(mask.sum()) / reach
        total.add_share(cost, share)
        for key, nbytes in cost.tail_copies.items():
            outer = outer_semaphore(key, branch.jaxpr, eqn.invars[1:])
            tails[outer] = tails.get(outer, 0.0) + nbytes * share
    walk.started.update({key: (nbytes, total.work()) for key, nbytes in tails.items()})
    walk.note("pl.when on program ids: each branch counted at the steps it runs")


def _cond_costliest(walk: _Walk, eqn: Any) -> None:
    """A conditional the grid does not decide: its costliest branch, and the copies that
    branch leaves in flight."""
    costs = [step_cost(b.jaxpr) for b in eqn.params["branches"]]
    at = max(range(len(costs)), key=lambda i: costs[i].weight())
    worst = costs[at]
    if any(b.weight() != worst.weight() for b in costs):
        worst.notes.append("a conditional in the body: its costliest branch counted")
    walk.total.add(worst)
    inner = eqn.params["branches"][at].jaxpr
    for key, nbytes in worst.tail_copies.items():
        walk.started[outer_semaphore(key, inner, eqn.invars[1:])] = (nbytes, walk.total.work())


def _scan(walk: _Walk, eqn: Any) -> None:
    """A scan run iteration by iteration where it can be, else its body times its length."""
    from ci_bench.measure.model.loops import simulate_scan

    simulated = simulate_scan(eqn, step_cost) or _scan_over_grid(
        walk.jaxpr, eqn, walk.grid, walk.env
    )
    if simulated is not None:
        walk.total.add(simulated)
    else:
        walk.total.add(step_cost(eqn.params["jaxpr"].jaxpr), eqn.params["length"])


def _while(walk: _Walk, eqn: Any) -> None:
    """A ``fori_loop`` with literal bounds: its body times its trips. Any other while: run
    iteration by iteration where the known values allow it, else its mean trip count read
    at every grid step, else its body once (and said so)."""
    if fori_trip_count(eqn) is None:
        simulated = _simulated_while(walk.jaxpr, eqn, walk.grid, walk.env)
        if simulated is not None:
            walk.total.add(simulated)
            return
        mean = _mean_trips(walk.jaxpr, eqn, walk.grid, walk.env)
        if mean is not None:
            walk.total.add_share(step_cost(eqn.params["body_jaxpr"].jaxpr), mean)
            walk.note("a while loop's trip count read from the case's inputs at every grid step")
            return
    trips = fori_trip_count(eqn)
    body = step_cost(eqn.params["body_jaxpr"].jaxpr)
    if trips is None:
        if body.weight():
            body.not_modelled.append("a while loop with a dynamic trip count in the body")
        trips = 1
    walk.total.add(body, trips)


def _run_scoped(walk: _Walk, eqn: Any) -> None:
    """The scoped body, its VMEM allocations added to the step's."""
    inner = eqn.params["jaxpr"]
    scoped = sum(
        padded_bytes(tuple(v.aval.shape), np.dtype(v.aval.dtype).itemsize)
        for v in inner.invars
        if "vmem" in memory_space(v.aval) and hasattr(v.aval, "dtype")
    )
    # run_scoped binds its operands to the inner jaxpr's constvars: their values at every
    # grid step carry in (a program id an emit_pipeline's index map reads).
    known = {
        inside: found
        for inside, outside in zip(inner.constvars, eqn.invars, strict=False)
        if (found := grid_values(walk.jaxpr, eqn, outside, walk.grid, walk.env)) is not None
    }
    if walk.env and TAKEN in walk.env:
        known[TAKEN] = walk.env[TAKEN]
    cost = step_cost(inner, walk.grid, known)
    cost.scoped_vmem_bytes += scoped
    walk.total.add(cost)


def _other(walk: _Walk, eqn: Any) -> None:
    """Any other equation: the jaxprs inside it, or its own vector work."""
    subs = sub_jaxprs(eqn)
    for sub in subs:
        walk.total.add(step_cost(sub))
    if not subs:
        walk.total.add(_vector_cost(eqn))


# The equations a body walk reads by their primitive's name (``_other`` reads the rest).
_HANDLERS = {
    "dot_general": _dot,
    "dma_start": _dma_start,
    "dma_wait": _dma_wait,
    "cond": _cond,
    "scan": _scan,
    "while": _while,
    "run_scoped": _run_scoped,
}
