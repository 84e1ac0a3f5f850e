"""``ci-bench ab --base REF``: head and base kernels measured as pairs, interleaved.

Separate runs drift apart, so each case's head and base kernels are timed round by round
on the same inputs, in one worker process per pair (``ci_bench.pipeline.ab``); the base is
checked out in a temporary git worktree beside this one.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.common_args import (
    add_fail_on,
    add_force,
    add_markdown,
    add_measurement,
    add_output,
    add_selection,
)
from ci_bench.commands.shared import emit_report, request_from, write_report_files
from ci_bench.errors import InputError
from ci_bench.pipeline.ab import resolve_base, run_ab
from ci_bench.pipeline.kernels import head_kernels

NAME = "ab"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        NAME, help="A/B: the base ref's kernels against the head's, in one process"
    )
    add_selection(parser)
    add_measurement(parser)
    parser.add_argument("--base", required=True, metavar="REF", help="git ref to compare with")
    parser.add_argument("--format", choices=("table", "markdown", "json"), default="table")
    add_output(parser, "the report JSON", force=None)
    add_markdown(parser)
    add_force(parser, "--output or --markdown file")
    add_fail_on(parser)
    parser.add_argument("--no-confirm", action="store_true", help="do not re-measure flagged cases")


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    if getattr(args, "resume", None) is not None:
        raise InputError("--resume does not apply to ab: an A/B is measured whole, in pairs")
    request = request_from(args, cwd)
    base = resolve_base(request.config.root, request.base)  # a bad ref: said before anything
    report = run_ab(request, head_kernels(request, env, measuring=True), env, base=base)
    write_report_files(report, request.outputs.output, args.markdown, replace=args.force)
    emit_report(report, request.outputs.fmt, out)
    return report.exit_code
