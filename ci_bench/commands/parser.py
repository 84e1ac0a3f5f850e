"""The command registry and the top-level parser.

Every subcommand is one module of this package with ``NAME``, ``register(subparsers)`` (its
flags, from ``common_args`` where shared) and ``run(args, env, cwd, out) -> int``; adding a
command is that module and one line in ``SUBCOMMANDS`` (in the order ``--help`` lists them).
A module is imported only when its command runs or its help is asked for: ``--version`` and
``--help`` import none of them (nor jax, pydantic or PyGithub), so they answer at once.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, TextIO

from ci_bench import __version__
from ci_bench.errors import InputError
from ci_bench.text import one_line


@dataclass(frozen=True)
class Command:
    """A subcommand as ``ci-bench --help`` lists it: its name, the module of
    ``ci_bench.commands`` that registers and runs it, and its one-line help (the module's
    own, checked equal by tests/test_cli_registry.py)."""

    name: str
    module: str
    help: str

    def load(self) -> ModuleType:
        return importlib.import_module(f"ci_bench.commands.{self.module}")


SUBCOMMANDS: tuple[Command, ...] = (
    Command("run", "run", "run the benchmark matrix and print a table"),
    Command("ci", "ci", "what the GitHub event asks for: run, compare, report, promote"),
    Command("ab", "ab", "A/B: the base ref's kernels against the head's, in one process"),
    Command(
        "profile",
        "profile",
        "jax.profiler trace of one case under a top-level jit; on a TPU the specification's "
        "unit metrics (MXU, scalar ALU, spills, DMA); HLO dump",
    ),
    Command("plot", "plot", "roofline chart (PNG) of a results file"),
    Command("comment", "comment", "post the sticky PR comment from a report artifact"),
    Command("list", "listing", "list kernels and the cases a selection expands to"),
    Command("schema", "schema", "print the results JSON Schema"),
    Command(
        "lower",
        "lower",
        "lower every selected case's Pallas kernel for TPU or CUDA, on this machine",
    ),
    Command(
        "check-spec",
        "check_spec",
        "validate kernel SPECs without running them (default: the config's); --run: "
        "each case of the ci profile once, for correctness",
    ),
    Command("compare", "compare", "compare results with baselines; exit on verdict"),
    Command("promote", "promote", "write results as baselines/<kernel>_v<version>.json"),
    Command(
        "remodel",
        "remodel",
        "a baseline's cost models brought to this ci-bench's model revision, its measurements kept",
    ),
    Command("merge", "merge", "join shard results into one results file"),
    Command("record", "record", "append a results file to the history store"),
    Command("history", "history", "commits where a case's level changed (PELT)"),
    Command("site", "site", "static dashboard of the history (file:// and Pages)"),
    Command("export", "export", "a results file as Bencher BMF or github-action-benchmark"),
    Command(
        "analyze",
        "analyze",
        "the cost model read from the Pallas grid: HBM bytes, grid steps, VMEM and "
        "modelled time per TPU chip or GPU (no accelerator; nothing is executed)",
    ),
    Command(
        "init", "init", "adopt ci-bench here: config, caller workflows, constraints, baselines"
    ),
    Command(
        "tune",
        "tune",
        "search the kernels' declared tunables (block sizes) with the cost model on this "
        "CPU: every candidate traced, lowered for TPU and modelled per chip, then ranked",
    ),
    Command(
        "preview",
        "preview",
        "the pull-request pipeline against a local base ref, here: the sticky comment "
        "a pull request would get",
    ),
)
BY_NAME: Mapping[str, Command] = {command.name: command for command in SUBCOMMANDS}


class Handler(Protocol):
    """A command's ``run``: the parsed flags and the process's edges in, the exit code out."""

    def __call__(
        self, args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO
    ) -> int: ...


class Handlers(dict[str, Handler]):
    """Each subcommand's ``run`` by name, its module imported on first use (a test may
    put another handler in its place)."""

    def __missing__(self, name: str) -> Handler:
        handler: Handler = BY_NAME[name].load().run
        self[name] = handler
        return handler


def handlers() -> Handlers:
    """Each subcommand's name and its ``run``, loaded when asked for."""
    return Handlers()


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


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand a command line names: its first word that is not an option (the
    top-level options, ``--version`` and ``--help``, take no value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command (``argv`` None: the docs, the tests), or of the one
    ``argv`` names, the others listed by name and help only (their modules not imported)."""
    parser = Parser(prog="ci-bench", description="Continuous benchmarking for JAX Pallas kernels.")
    parser.add_argument("--version", action="version", version=f"ci-bench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = None if argv is None else command_of(argv)
    for command in SUBCOMMANDS:
        if argv is None or command.name == chosen:
            command.load().register(sub)
        else:
            sub.add_parser(command.name, help=command.help)
    return parser
