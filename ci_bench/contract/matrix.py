"""Expand kernel specs into cases; select by kernel and id glob; shard across runners."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ci_bench.contract.spec import PROFILES, Case, KernelSpec


class SelectionError(ValueError):
    """A selection names nothing that exists (unknown kernel, profile, bad shard)."""


@dataclass(frozen=True)
class Shard:
    """Runner ``index`` (1-based) of ``count``, as in the Actions matrix ``--shard 2/4``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not match:
            raise SelectionError(f"--shard wants I/N (e.g. 1/4), got {text!r}")
        index, count = int(match[1]), int(match[2])
        if not 1 <= index <= count:
            raise SelectionError(f"--shard {text}: index must be between 1 and {count}")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


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


def select(cases: Iterable[Case], patterns: Sequence[str]) -> list[Case]:
    """Cases whose id matches any glob (``matmul/B4-*``); every pattern must match one."""
    cases = list(cases)
    if not patterns:
        return cases
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(c.id, pattern) for c in cases):
            raise SelectionError(f"--case {pattern!r} matches no case")
    return [c for c in cases if any(fnmatch.fnmatchcase(c.id, p) for p in patterns)]


def shard(cases: Sequence[Case], part: Shard | None) -> list[Case]:
    """Round-robin share of ``cases`` for one runner; the shards partition the matrix."""
    if part is None:
        return list(cases)
    return [c for i, c in enumerate(cases) if i % part.count == part.index - 1]
