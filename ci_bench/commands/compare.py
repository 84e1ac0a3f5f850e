"""``ci-bench compare``: results judged against the stored baselines; the exit code is the
verdict's."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.common_args import (
    add_baselines_dir,
    add_config,
    add_force,
    add_markdown,
    add_output,
    add_wide,
)
from ci_bench.commands.shared import emit_report, request_from, write_report_files
from ci_bench.commands.validate import path_arg
from ci_bench.pipeline.judging import baseline_report, load_results

NAME = "compare"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(NAME, help="compare results with baselines; exit on verdict")
    parser.add_argument("results", type=path_arg, help="results JSON from ci-bench run")
    add_baselines_dir(parser)
    parser.add_argument(
        "--baseline",
        type=path_arg,
        action="append",
        default=[],
        metavar="FILE",
        help="compare with this baseline file (repeatable, one per kernel)",
    )
    parser.add_argument(
        "--baseline-version",
        metavar="VERSION",
        help="compare with this version's baselines: VERSION (every kernel that has it) "
        "or KERNEL=VERSION,...",
    )
    parser.add_argument("--format", choices=("table", "markdown", "json"), default="table")
    add_output(parser, "the report JSON", force=None)
    add_markdown(parser)
    add_force(parser, "--output or --markdown file")
    parser.add_argument(
        "--fail-on",
        metavar="STATES",
        help="states that fail besides regression, e.g. error,missing,noisy "
        "('none' for regressions only; default: config)",
    )
    add_config(parser)
    add_wide(parser)


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    request = request_from(args, cwd)
    assert request.inputs.results is not None
    report = baseline_report(request, load_results(request.inputs.results))
    write_report_files(report, request.outputs.output, args.markdown, replace=args.force)
    emit_report(report, request.outputs.fmt, out, wide=args.wide)
    return report.exit_code
