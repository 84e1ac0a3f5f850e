"""THE exit-code rule: every command's and every pipeline role's exit code comes from here.

A command ends with an ``Outcome``: the verdict states it judged (cases and the run), how
many cases it measured, whether a measurement it owed did not finish, and whether a GitHub
step failed. ``exit_code`` turns that into the documented code (README, "Exit codes").
Usage errors (2), bugs (5) and signals (130, 143) never reach an Outcome: they are
exceptions, mapped once in ``ci_bench.commands.cli``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ci_bench.errors import ExitCode


class Policy(Protocol):
    def fails(self, state: str) -> bool: ...


@dataclass(frozen=True)
class Outcome:
    """What a command ended with, before it is an exit code."""

    # Verdict states present (case and run states), with their counts.
    states: Mapping[str, int] = field(default_factory=dict)
    policy: Policy | None = None
    # Memory regressions fail like a time regression.
    memory_regressions: int = 0
    # Cases measured fine; None when the command measured or judged nothing (a comment).
    measured: int | None = None
    # A measurement this command owed did not finish (a shard's results are incomplete).
    unfinished: str | None = None
    # A GitHub API step failed after retries (everything else was written first).
    github: str | None = None

    @property
    def failing(self) -> list[str]:
        """The states (or duties) that fail the run, in the order given."""
        found = [s for s, n in self.states.items() if n and self.policy and self.policy.fails(s)]
        if self.memory_regressions:
            found.append("memory-regression")
        if self.unfinished:
            found.append("unfinished")
        return found


def exit_code(outcome: Outcome) -> ExitCode:
    """3 nothing measured; 1 failing states or an unfinished measurement; 4 GitHub; 0."""
    if outcome.measured == 0:
        return ExitCode.NOTHING_MEASURED
    if outcome.failing:
        return ExitCode.FAILED
    if outcome.github:
        return ExitCode.GITHUB
    return ExitCode.OK


@dataclass(frozen=True)
class Always:
    """A policy under which these states always fail, whatever the config says: a case
    that does not lower, or is wrong, is never a matter of taste."""

    states: frozenset[str]

    def fails(self, state: str) -> bool:
        return state in self.states


ERRORS_FAIL = Always(frozenset({"error"}))
