"""Tunables: the named knobs (block sizes, mostly) a kernel's subject takes, and their
candidate values, so ``ci-bench tune`` can search them on a CPU (docs/TUNE.md).

A SPEC's ``tunables`` says which values each knob may take, which combinations are legal
for a case (``divides("block_k", "K")``), how a set of values becomes the kernel's own
validated config (``config=BlockSizes``: a frozen dataclass that raises on bad values, as
jax's ``BlockSizes`` does) and how the subject takes that config (``build``). The subject
itself keeps its default config, so case ids and baselines do not change. Pure: nothing is
traced here.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ci_bench.contract.spec import PALLAS, PROFILES, KernelSpec, SpecError
from ci_bench.text import PARAM, one_line

Value = int | str | bool
Values = Mapping[str, Value]
MAX_CANDIDATES = 1_000_000  # a space bigger than this is a typo, not a search


class TunablesError(SpecError):
    """A SPEC's tunables break the contract (an empty knob, a default outside its values)."""


@dataclass(frozen=True)
class Constraint:
    """A rule a candidate must keep for a case: ``check(values, params)`` is True when the
    candidate ``values`` are legal for the case's parameters; ``text`` says the rule."""

    text: str
    check: Callable[[Values, Mapping[str, int]], bool]


def divides(tunable: str, param: str) -> Constraint:
    """``tunable | param``: the block size divides the case's dimension."""
    return Constraint(
        f"{tunable} | {param}", lambda v, p: p.get(param) is None or p[param] % v[tunable] == 0
    )


def at_most(tunable: str, param: str) -> Constraint:
    """``tunable <= param``: no block larger than the case's dimension."""
    return Constraint(
        f"{tunable} <= {param}", lambda v, p: p.get(param) is None or v[tunable] <= p[param]
    )


def _values(name: str, values: Sequence[Value]) -> tuple[Value, ...]:
    if not isinstance(name, str) or not PARAM.fullmatch(name):
        raise TunablesError(f"tunable name {name!r} must match {PARAM.pattern}")
    if isinstance(values, str | bytes) or not isinstance(values, Sequence | range):
        raise TunablesError(f"tunable {name}: candidate values must be a sequence")
    out = tuple(values)
    if not out:
        raise TunablesError(f"tunable {name}: no candidate values")
    for value in out:
        if not isinstance(value, int | str | bool):
            raise TunablesError(
                f"tunable {name}: value {value!r} is not an int, str or bool (configs are data)"
            )
    if len(set(out)) != len(out):
        raise TunablesError(f"tunable {name}: candidate values {out} repeat one")
    return out


@dataclass(frozen=True)
class Tunables:
    """The subject's knobs. ``space``: name -> candidate values (ints, strs or bools), in
    the order the config takes them; ``default``: the values the subject uses (one
    candidate); ``build(config)``: the subject with that config, same signature as
    ``pallas``; ``config(**values)``: the kernel's own config object (None: the values as
    a read-only mapping), raising ValueError/TypeError for values it refuses;
    ``constraints``: per-case rules."""

    space: Mapping[str, Sequence[Value]]
    default: Values
    build: Callable[[Any], Callable[..., Any]]
    config: Callable[..., Any] | None = None
    constraints: tuple[Constraint, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not isinstance(self.space, Mapping) or not self.space:
            raise TunablesError("tunables need at least one knob in space")
        space = {name: _values(name, values) for name, values in self.space.items()}
        object.__setattr__(self, "space", MappingProxyType(space))
        if not callable(self.build):
            raise TunablesError(f"tunables: build is not callable ({type(self.build).__name__})")
        if self.config is not None and not callable(self.config):
            raise TunablesError(f"tunables: config is not callable ({type(self.config).__name__})")
        constraints = tuple(self.constraints)
        for rule in constraints:
            if not isinstance(rule, Constraint):
                raise TunablesError(f"tunables: constraint {rule!r} is not a Constraint")
        object.__setattr__(self, "constraints", constraints)
        default = dict(self.default)
        if set(default) != set(space):
            raise TunablesError(
                f"tunables: default names {sorted(default)}, the space {sorted(space)}"
            )
        for name, value in default.items():
            if value not in space[name]:
                raise TunablesError(
                    f"tunables: default {name}={value!r} is not one of its candidates"
                )
        object.__setattr__(self, "default", MappingProxyType(self.ordered(default)))
        if self.size > MAX_CANDIDATES:
            raise TunablesError(f"tunables: {self.size} candidates (at most {MAX_CANDIDATES})")

    @property
    def size(self) -> int:
        """How many candidates the space holds (before any constraint)."""
        return math.prod(len(v) for v in self.space.values())

    def ordered(self, values: Values) -> dict[str, Value]:
        """``values`` in the space's order."""
        return {name: values[name] for name in self.space}

    def candidates(self) -> Iterator[dict[str, Value]]:
        """Every combination, first knob outermost, in the order the values are given."""
        names = list(self.space)
        for combo in itertools.product(*self.space.values()):
            yield dict(zip(names, combo, strict=True))

    def with_values(self, overrides: Mapping[str, Sequence[Value]]) -> Tunables:
        """The same tunables searching other candidate values for some knobs (``tune
        --values``); the default joins its knob's values when left out."""
        unknown = [name for name in overrides if name not in self.space]
        if unknown:
            raise TunablesError(
                f"unknown tunable(s) {', '.join(unknown)}; known: {', '.join(self.space)}"
            )
        space = {name: tuple(overrides.get(name, values)) for name, values in self.space.items()}
        for name, value in self.default.items():
            if value not in space[name]:
                space[name] = (value, *space[name])
        return Tunables(space, self.default, self.build, self.config, self.constraints)

    def rejects(self, values: Values, params: Mapping[str, int]) -> str | None:
        """Why ``values`` cannot run the case (a broken constraint, or the kernel's config
        refusing them), one line; None when the candidate is legal."""
        for rule in self.constraints:
            try:
                ok = rule.check(values, params)
            except Exception as exc:  # a broken rule is the finding, said once per candidate
                return f"constraint {rule.text} raised {one_line(exc)}"
            if not ok:
                shown = ", ".join(f"{k}={params[k]}" for k in params)
                return f"breaks {rule.text} ({shown})"
        try:
            self.make_config(values)
        except (ValueError, TypeError) as exc:
            return f"config refused: {one_line(exc)}"
        return None

    def make_config(self, values: Values) -> Any:
        """The kernel's config object for ``values`` (validated by the kernel's own type)."""
        ordered = self.ordered(values)
        return MappingProxyType(ordered) if self.config is None else self.config(**ordered)

    def implementation(self, values: Values) -> Callable[..., Any]:
        """The subject with ``values``: what ``tune`` traces, models and times."""
        return self.build(self.make_config(values))


def default_problems(spec: KernelSpec, limit: int = 3) -> list[str]:
    """``check-spec``: the tunables' default config must be legal on every case of every
    profile (its constraints and its config type): it is what the subject runs."""
    tunables = spec.tunables
    if tunables is None:
        return []
    found: dict[tuple[tuple[str, int], ...], str] = {}
    for profile in (p for p in PROFILES if p in spec.matrix):  # smallest first
        for case in spec.cases(profile):
            point = tuple(case.params.items())
            if point in found:
                continue
            why = tunables.rejects(tunables.default, case.params)
            if why is not None:
                found[point] = f"tunables: the default config {why} on {case.id}"
    problems = list(found.values())
    if len(problems) > limit:
        return [*problems[:limit], f"tunables: {len(problems) - limit} more cases like these"]
    return problems


def with_subject(spec: KernelSpec, implementation: Callable[..., Any]) -> KernelSpec:
    """The SPEC with ``implementation`` as its subject, everything else unchanged."""
    if spec.subject == PALLAS:
        return dataclasses.replace(spec, pallas=implementation)
    if spec.subject in spec.variants:
        return dataclasses.replace(spec, variants={**spec.variants, spec.subject: implementation})
    return dataclasses.replace(spec, native=implementation)


def configured(spec: KernelSpec, values: Values, params: Mapping[str, int]) -> KernelSpec:
    """The SPEC whose subject runs with ``values`` over its tunables' defaults (``profile
    --set block_m=512``); a ``TunablesError`` names a knob it lacks or a value it refuses."""
    tunables = spec.tunables
    if tunables is None:
        raise TunablesError(f"kernel {spec.name} has no tunables to set")
    unknown = sorted(set(values) - set(tunables.space))
    if unknown:
        known = ", ".join(tunables.space)
        raise TunablesError(f"kernel {spec.name} has no tunable {unknown[0]!r} (known: {known})")
    chosen = {**tunables.default, **values}
    if (why := tunables.rejects(chosen, params)) is not None:
        raise TunablesError(f"kernel {spec.name}: {why}")
    return with_subject(spec, tunables.implementation(chosen))
