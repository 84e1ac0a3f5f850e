"""``ci-bench list``: the kernels and the case ids a selection expands to."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.common_args import add_selection
from ci_bench.commands.shared import request_from
from ci_bench.pipeline.session import cases_for, load_specs

NAME = "list"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    add_selection(sub.add_parser(NAME, help="list kernels and the cases a selection expands to"))


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    request = request_from(args, cwd)
    specs = load_specs(request)
    for name in request.selection.kernels or tuple(specs):
        if name in specs:
            spec = specs[name]
            out.write(f"# {spec.name} v{spec.version}: {spec.description}\n")
    for case in cases_for(request.selection, specs):
        out.write(case.id + "\n")
    return 0
