"""``ci-bench ci`` and ``ci-bench comment``: one pipeline role for the GitHub event.

The decisions (which steps, against what, what a missing piece means, the exit code) are
the pipeline's (``ci_bench.pipeline``); this adapter reads the flags, the config and the
Actions environment, and makes one call.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.errors import InputError
from ci_bench.github.context import WorkflowRun
from ci_bench.github.context import load_context as load_actions_context
from ci_bench.outcome import exit_code
from ci_bench.pipeline.config import load_config
from ci_bench.pipeline.run import run_ci


def cmd_ci(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    flags = vars(args)
    role = flags.get("role") or "all"
    if flags.get("report_dir") is not None and role not in ("comment", "relay"):
        # Only those roles read an artifact folder: any other would ignore it (exit 2).
        raise InputError(
            f"--report-dir: the {role} role reads no artifact folder (only comment and relay do)"
        )
    actions = load_actions_context(env)
    config = load_config(flags.get("config"), cwd)
    return int(exit_code(run_ci(flags, config, actions, env, out)))


def cmd_comment(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    """The sticky comment from a report artifact (the comment role; a ``workflow_run``
    event relays the artifact of another workflow)."""
    actions = load_actions_context(env)
    role = "relay" if isinstance(actions.event, WorkflowRun) else "comment"
    flags = {"role": role, "report_dir": args.report_dir, "config": None}
    return int(exit_code(run_ci(flags, load_config(None, cwd), actions, env, out)))
