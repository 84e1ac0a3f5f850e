"""Expand kernel specs into cases; select by kernel and id glob; shard across runners."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence

from ci_bench.contract.spec import MODES, PROFILES, Case, KernelSpec
from ci_bench.errors import SelectionError
from ci_bench.schema.shard import Shard


def expand(
    specs: Mapping[str, KernelSpec],
    profile: str,
    kernels: Sequence[str] = (),
) -> list[Case]:
    """Cases of the chosen kernels (all when empty) for one profile, in a stable order."""
    if profile not in PROFILES:
        raise SelectionError(f"unknown profile {profile!r}; expected one of {', '.join(PROFILES)}")
    names = list(dict.fromkeys(kernels)) or list(specs)
    unknown = [n for n in names if n not in specs]
    if unknown:
        known = ", ".join(specs) or "none"
        raise SelectionError(f"unknown kernel {', '.join(unknown)} (known: {known})")
    return [case for name in names for case in specs[name].cases(profile)]


def profile_notes(
    specs: Mapping[str, KernelSpec], profile: str, kernels: Sequence[str] = ()
) -> list[str]:
    """One note per chosen kernel that does not declare ``profile`` and runs another."""
    notes = []
    for name in dict.fromkeys(kernels) or specs:
        spec = specs.get(name)
        if spec is not None and profile in PROFILES and profile not in spec.matrix:
            used = spec.profile_for(profile)
            notes.append(f"kernel {name} declares no {profile!r} profile: running {used!r}")
    return notes


def matches(case: Case, pattern: str) -> bool:
    """Does a ``--case`` glob select this case? A forward case's id has no mode (it is the
    id cases had before modes existed), so it also answers to ``<id>/forward``: then
    ``'*/forward'`` selects the forward cases alone, as ``'*/backward'`` does the backward."""
    if fnmatch.fnmatchcase(case.id, pattern):
        return True
    return case.mode == "forward" and fnmatch.fnmatchcase(f"{case.id}/forward", pattern)


def select(cases: Iterable[Case], patterns: Sequence[str]) -> list[Case]:
    """Cases whose id matches any glob (``matmul/B4-*``); every pattern must match one."""
    cases = list(cases)
    if not patterns:
        return cases
    for pattern in patterns:
        if not any(matches(c, pattern) for c in cases):
            raise SelectionError(f"--case {pattern!r} matches no case")
    return [c for c in cases if any(matches(c, p) for p in patterns)]


def shard(cases: Sequence[Case], part: Shard | None) -> list[Case]:
    """Round-robin share of ``cases`` for one runner; the shards partition the matrix."""
    if part is None:
        return list(cases)
    return [c for i, c in enumerate(cases) if i % part.count == part.index - 1]


_PARAM = re.compile(r"([A-Za-z_]+)(\d+)")


def find_case(spec: KernelSpec, case_id: str) -> Case:
    """The case with this id from any matrix profile, else one parsed from the id itself.

    Parsing lets a user profile a shape outside the matrix (``matmul/B1-M2048-K2048-N2048/
    bfloat16``) as long as it names exactly the kernel's parameters.
    """
    for profile in spec.matrix:
        for case in spec.cases(profile):
            if case.id == case_id:
                return case
    parts = case_id.split("/")
    mode = parts.pop() if len(parts) == 4 and parts[3] in MODES else "forward"
    if len(parts) != 3 or parts[0] != spec.name:
        raise SelectionError(
            f"case id {case_id!r} is not {spec.name}/<params>/<dtype>[/<mode>] "
            f"(modes: {', '.join(MODES)})"
        )
    if mode not in spec.modes:
        raise SelectionError(f"case id {case_id!r}: {spec.name} has no mode {mode!r}")
    matches = [_PARAM.fullmatch(p) for p in parts[1].split("-")]
    if not all(matches):
        raise SelectionError(f"case id {case_id!r}: parameters must look like M128-K256")
    params = {m[1]: int(m[2]) for m in matches if m}
    known = {tuple(p) for prof in spec.matrix.values() for p in prof.points}
    if tuple(params) not in known:
        keys = " or ".join(sorted({"-".join(k) for k in known}))
        raise SelectionError(f"case id {case_id!r}: {spec.name} takes parameters {keys}")
    if parts[2] not in spec.tolerances:
        raise SelectionError(f"case id {case_id!r}: {spec.name} has no dtype {parts[2]!r}")
    return Case(spec.name, params, parts[2], mode)
