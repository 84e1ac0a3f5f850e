"""``ci-bench ci``: one pipeline role for the GitHub event.

The decisions (which steps, against what, what a missing piece means, the exit code) are
the pipeline's (``ci_bench.pipeline``); this adapter reads the flags, the config and the
Actions environment, and makes one call.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.common_args import (
    FOLDER,
    add_baselines_dir,
    add_fail_on,
    add_measurement,
    add_selection,
)
from ci_bench.commands.shared import check_given_file
from ci_bench.commands.validate import Existing, path_arg
from ci_bench.defaults import OUT_DIR
from ci_bench.errors import InputError
from ci_bench.github.context import load_context as load_actions_context
from ci_bench.outcome import exit_code
from ci_bench.pipeline.config import load_config
from ci_bench.pipeline.plan import ROLES
from ci_bench.pipeline.run import run_ci

NAME = "ci"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        NAME, help="what the GitHub event asks for: run, compare, report, promote"
    )
    add_selection(parser)
    add_measurement(parser)
    parser.add_argument(
        "--role",
        choices=ROLES,
        default="all",
        help="the workflow job this call is: plan (which jobs run), shard, ab, report, "
        "comment, lower, relay, promote, record; all (default) does everything in one job",
    )
    parser.add_argument(
        "--report-dir",
        type=path_arg,
        help="comment and relay roles: the downloaded artifact (default: --out-dir)",
    )
    FOLDER.on(
        parser.add_argument(
            "--out-dir",
            type=path_arg,
            default=OUT_DIR,
            help="results, report and comment context go here (the artifact; a re-run job "
            "rewrites its files)",
        )
    )
    parser.add_argument(
        "--results", type=path_arg, help="use these (merged) results instead of running"
    )
    parser.add_argument(
        "--ab-report",
        type=path_arg,
        metavar="FILE",
        help="mode both: the A/B report another job measured (instead of running the A/B here)",
    )
    parser.add_argument(
        "--baseline-version",
        metavar="VERSION",
        help="compare with this version's baselines: VERSION or KERNEL=VERSION,... "
        "(default: each kernel's own; a dispatch input)",
    )
    # Read at another commit with --baselines-ref, the folder need not exist here.
    add_baselines_dir(parser, Existing(unless="baselines_ref"))
    parser.add_argument(
        "--baselines-ref",
        metavar="REF",
        help="read the baseline folder as it is at this commit (default on a pull request: "
        "its base commit, which the PR cannot edit; '' for the checkout's own)",
    )
    add_fail_on(parser, "event, config")
    parser.add_argument("--no-comment", action="store_true", help="never post the PR comment")
    parser.add_argument(
        "--no-publish",
        action="store_true",
        help="write results and report files only: no summary, outputs, annotations, comment "
        "(shard jobs, whose merged report is published once)",
    )
    parser.add_argument(
        "--mode",
        choices=("baseline", "ab", "both"),
        help="stored baseline, A/B against a base ref, or both (default: event, config)",
    )
    parser.add_argument("--base", metavar="REF", help="A/B base ref (default: the PR's base)")
    parser.add_argument(
        "--promote-via",
        choices=("commit", "pull-request"),
        help="how a release tag's baselines land (default: config)",
    )


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    flags = vars(args)
    role = flags.get("role") or "all"
    if flags.get("report_dir") is not None and role not in ("comment", "relay"):
        # Only those roles read an artifact folder: any other would ignore it (exit 2).
        raise InputError(
            f"--report-dir: the {role} role reads no artifact folder (only comment and relay do)"
        )
    check_given_file(flags.get("resume"), "results file to resume", "--resume")
    # Only the report and single jobs read these (a lost shards folder or A/B is reported):
    # any other role would ignore a mistyped path.
    if role not in ("report", "all"):
        check_given_file(flags.get("results"), "results file", "--results")
        check_given_file(flags.get("ab_report"), "A/B report", "--ab-report")
    actions = load_actions_context(env)
    config = load_config(flags.get("config"), cwd)
    return int(exit_code(run_ci(flags, config, actions, env, out)))
