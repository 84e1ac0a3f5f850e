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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ci_bench.measure.model.calls import Call, NotModelledError, build_call
from ci_bench.measure.model.jaxpr_read import fori_trip_count

Platform = str  # "tpu" or "gpu"
_GPU_NAMES = ("cuda", "rocm", "gpu")
# Call-like primitives whose sub-jaxpr runs once, with the caller's operands.
_CALLS = ("jit", "pjit", "closed_call", "core_call", "remat", "remat2", "checkpoint")
# custom_vmap_call (jax.custom_batching, wrapped around every op by some libraries): its
# ``call`` is the unbatched function, run once with the caller's operands.
_CUSTOM = ("custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr", "custom_vmap_call")


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


def called(params: Any) -> tuple[Any, list[Any]]:
    """(Jaxpr, consts) a call-like primitive (``_CALLS``, ``_CUSTOM``) runs with its own
    operands, from its params."""
    key = next(k for k in ("jaxpr", "call_jaxpr", "fun_jaxpr", "call") if k in params)
    return _jaxpr_of(params[key])


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
        """The slice of the program that computes ``atom``, run on CPU. The slice is taken
        here rather than by jax's DCE, which never removes a ``pallas_call`` (its rule keeps
        every call): the kernel that *reads* the value would land in its own slice."""
        import jax
        from jax._src import core as jax_core

        needed = {atom}
        eqns = []
        for eqn in reversed(self.jaxpr.eqns):
            if any(v in needed for v in eqn.outvars):
                eqns.append(eqn)
                needed |= {v for v in eqn.invars if not _is_literal(v)}
        eqns.reverse()
        if any(
            e.primitive.name == "pallas_call" or _holds_pallas_call(eqn_jaxprs(e)) for e in eqns
        ):
            raise NotModelledError("a scalar-prefetch operand computed by another pallas_call")
        sources = [v for v in [*self.jaxpr.constvars, *self.jaxpr.invars] if v in needed]
        sliced = self.jaxpr.replace(
            constvars=[],
            invars=sources,
            outvars=[atom],
            eqns=eqns,
            effects=jax_core.join_effects(*(e.effects for e in eqns)),
        )
        args = [self.value(v) for v in sources]
        with jax.default_device(jax.devices("cpu")[0]):
            (out,) = jax_core.eval_jaxpr(sliced, [], *args)
        return np.asarray(out)


def _is_literal(atom: Any) -> bool:
    from jax.extend import core as jcore

    return isinstance(atom, jcore.Literal)


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
                inner, consts = called(params)
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
                if _holds_pallas_call(eqn_jaxprs(eqn)):
                    found.not_modelled.append(f"pallas_calls under {name} (sharded)")
            else:
                _other(found, eqn, platform, count)
        except NotModelledError as exc:
            found.not_modelled.append(str(exc))
    return found


def eqn_jaxprs(eqn: Any) -> Any:
    """A Jaxpr-like view of every sub-jaxpr of ``eqn`` (for _holds_pallas_call)."""
    from types import SimpleNamespace

    from jax.extend import core as jcore

    subs = [s.jaxpr if hasattr(s, "jaxpr") else s for s in jcore.jaxprs_in_params(eqn.params)]
    return SimpleNamespace(eqns=[e for sub in subs for e in sub.eqns])


def _other(found: Walk, eqn: Any, platform: Platform, count: int) -> None:
    """Any other primitive holding jaxprs: its pallas_calls counted once, and said so."""
    from jax.extend import core as jcore

    subs = list(jcore.jaxprs_in_params(eqn.params))
    if not subs or not _holds_pallas_call(eqn_jaxprs(eqn)):
        return
    for sub in subs:
        inner, consts = _jaxpr_of(sub)

        def opaque(i: int) -> Any:
            raise NotModelledError(f"a scalar-prefetch operand inside {eqn.primitive.name}")

        _merge(found, walk(inner, Scope(inner, consts, opaque), platform, count))
    note = f"pallas_calls inside {eqn.primitive.name}: counted once per execution"
    if note not in found.not_modelled:
        found.not_modelled.append(note)


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
    if trips is None:
        trips = _dynamic_trips(eqn, scope)
    if trips == 0:
        return  # the loop runs no iteration: nothing in it runs
    child = _loop_scope(scope, inner, consts, operands)
    body = walk(inner, child, platform, count * (trips or 1))
    if body.items and trips is None:
        found.not_modelled.append("pallas_calls in a while loop with a dynamic trip count")
        return
    _merge(found, body)


def _dynamic_trips(eqn: Any, scope: Scope) -> int | None:
    """A ``fori_loop(lo, hi)`` whose bounds are traced values: hi - lo from the case's real
    inputs (as a dynamic grid is); None when the loop is not of that form or a bound cannot
    be computed without running a kernel."""
    from jax.extend import core as jcore

    cond = eqn.params["cond_jaxpr"].jaxpr
    cn, bn = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
    if len(cond.eqns) != 1 or cond.eqns[0].primitive.name != "lt":
        return None
    consts, carries = eqn.invars[:cn], eqn.invars[cn + bn :]

    def outer(var: Any) -> int:
        if isinstance(var, jcore.Literal):
            return int(var.val)
        where = cond.invars.index(var)
        source = consts[where] if where < cn else carries[where - cn]
        return int(np.asarray(scope.value(source)))

    try:
        start, stop = (outer(v) for v in cond.eqns[0].invars)
    except (NotModelledError, ValueError, TypeError):
        return None
    return max(stop - start, 0)
