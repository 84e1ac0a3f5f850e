"""The command registry and the top-level parser.

Every subcommand is one module of this package with ``NAME``, ``register(subparsers)`` (its
flags, from ``common_args`` where shared) and ``run(args, env, cwd, out) -> int``; adding a
command is that module and one line in ``SUBCOMMANDS`` (in the order ``--help`` lists them).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, TextIO

from ci_bench import __version__
from ci_bench.commands import (
    ab,
    analyze,
    check_spec,
    ci,
    comment,
    compare,
    export,
    history,
    init,
    listing,
    lower,
    merge,
    plot,
    preview,
    profile,
    promote,
    record,
    run,
    schema,
    site,
    tune,
)
from ci_bench.errors import InputError
from ci_bench.text import one_line

SUBCOMMANDS: tuple[ModuleType, ...] = (
    run,
    ci,
    ab,
    profile,
    plot,
    comment,
    listing,
    schema,
    lower,
    check_spec,
    compare,
    promote,
    merge,
    record,
    history,
    site,
    export,
    analyze,
    init,
    tune,
    preview,
)


class Handler(Protocol):
    """A command's ``run``: the parsed flags and the process's edges in, the exit code out."""

    def __call__(
        self, args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO
    ) -> int: ...


def handlers() -> dict[str, Handler]:
    """Each subcommand's name and its ``run``."""
    return {module.NAME: module.run for module in SUBCOMMANDS}


class Parser(argparse.ArgumentParser):
    """Usage errors in one line (the promise for every bad input), exit 2; every declared
    output path (``Output.on``) checked as soon as the command line is parsed, then every
    folder that must exist (``Existing.on``)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        text = one_line(str(message))[:500]
        self.exit(2, f"{self.prog}: error: {text} (see {self.prog} --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        namespace, extras = super().parse_known_args(args, namespace)
        for kind in ("output", "existing"):
            for action in self._actions:
                rule = getattr(action, kind, None)
                value = getattr(namespace, action.dest, None)
                if rule is not None and value is not None:
                    flag = action.option_strings[0] if action.option_strings else action.dest
                    try:
                        rule.check(Path(value), flag, namespace)
                    except InputError as exc:
                        self.exit(2, f"ci-bench: error: {one_line(str(exc))[:500]}\n")
        return namespace, extras


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="ci-bench", description="Continuous benchmarking for JAX Pallas kernels.")
    parser.add_argument("--version", action="version", version=f"ci-bench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.register(sub)
    return parser
