"""``ci-bench export``: a results file as Bencher BMF or github-action-benchmark JSON."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.common_args import FILE
from ci_bench.commands.validate import path_arg
from ci_bench.errors import ExitCode
from ci_bench.report.export import FORMATS, export
from ci_bench.schema.base import json_text
from ci_bench.schema.results import RESULTS_READABLE, Results
from ci_bench.store.files import read_model, write_text

NAME = "export"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(NAME, help="a results file as Bencher BMF or github-action-benchmark")
    parser.add_argument("results", type=path_arg)
    parser.add_argument("--format", choices=FORMATS, required=True)
    FILE.on(
        parser.add_argument("--output", "-o", type=path_arg, help="write here instead of stdout")
    )
    parser.add_argument("--force", action="store_true", help="replace an existing --output file")


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    results = read_model(args.results, Results, what="results", schema_version=RESULTS_READABLE)
    data = export(results, args.format)
    text = json_text(data)
    if args.output:
        write_text(args.output, text, what="export", replace=args.force)
    else:
        out.write(text)
    if not data:
        sys.stderr.write(
            "ci-bench: nothing to export (exit 3): the results hold no ok case; measure "
            "again with `ci-bench run -o RESULTS`\n"
        )
    return 0 if data else int(ExitCode.NOTHING_MEASURED)
