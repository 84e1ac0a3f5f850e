"""``ci-bench comment``: the sticky PR comment from a report artifact (the comment role; a
``workflow_run`` event relays the artifact of another workflow)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.validate import path_arg
from ci_bench.github.context import WorkflowRun
from ci_bench.github.context import load_context as load_actions_context
from ci_bench.outcome import exit_code
from ci_bench.pipeline.config import load_config
from ci_bench.pipeline.run import run_ci

NAME = "comment"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(NAME, help="post the sticky PR comment from a report artifact")
    parser.add_argument(
        "--report-dir",
        type=path_arg,
        required=True,
        help="downloaded artifact with report.json and pr.json",
    )


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    actions = load_actions_context(env)
    role = "relay" if isinstance(actions.event, WorkflowRun) else "comment"
    flags = {"role": role, "report_dir": args.report_dir, "config": None}
    return int(exit_code(run_ci(flags, load_config(None, cwd), actions, env, out)))
