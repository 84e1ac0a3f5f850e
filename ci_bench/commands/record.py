"""``ci-bench record``: a results file appended to the history store (a local folder, or
the data branch through the contents API)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.common_args import FOLDER, add_config
from ci_bench.commands.validate import int_range, path_arg, tag_arg
from ci_bench.errors import InputError
from ci_bench.github.api import GitHubClient
from ci_bench.github.context import PUBLIC_API
from ci_bench.github.history import append_through_api
from ci_bench.pipeline.config import Config, load_config
from ci_bench.schema.report import REPORT_READABLE, Report
from ci_bench.schema.results import RESULTS_READABLE, Results
from ci_bench.store.files import read_json, read_model
from ci_bench.store.history import DATA_BRANCH, DEFAULT_KEEP, append_local, record_from_results

NAME = "record"
_PR_IN_MESSAGE = re.compile(r"\(#(\d+)\)\s*$|^Merge pull request #(\d+)", re.MULTILINE)
KEEP_MAX = 100_000
PR_MAX = 2**31 - 1


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(NAME, help="append a results file to the history store")
    parser.add_argument("results", type=path_arg)
    where = parser.add_mutually_exclusive_group(required=True)
    FOLDER.on(
        where.add_argument("--history", type=path_arg, metavar="DIR", help="local history folder")
    )
    where.add_argument(
        "--remote",
        action="store_true",
        help=f"the data branch through the contents API (GITHUB_TOKEN; default {DATA_BRANCH})",
    )
    parser.add_argument("--branch", default=DATA_BRANCH, help="data branch (with --remote)")
    parser.add_argument("--folder", default="history", help="folder on the data branch")
    parser.add_argument("--report", type=path_arg, help="report.json: store each case's verdict")
    parser.add_argument("--source", choices=("run", "promotion"), default="run")
    parser.add_argument("--tag", type=tag_arg, help="release tag (promotions)")
    parser.add_argument(
        "--pr", type=int_range(1, PR_MAX), help="pull request number (default: from the event)"
    )
    parser.add_argument(
        "--keep",
        type=int_range(1, KEEP_MAX),
        default=DEFAULT_KEEP,
        help=f"records kept per device ({DEFAULT_KEEP})",
    )
    add_config(parser)


def _pr_from_event(env: Mapping[str, str]) -> int | None:
    """A push's head commit message names the PR it merged: "Title (#12)" or "Merge pull
    request #12"; anything unreadable means no PR, never an error."""
    path = env.get("GITHUB_EVENT_PATH")
    if not path:
        return None
    try:
        payload = read_json(Path(path), "event payload")
        message = str((payload.get("head_commit") or {}).get("message") or "")
    except (InputError, AttributeError):
        return None
    match = _PR_IN_MESSAGE.search(message.splitlines()[0] if message else "")
    return int(match[1] or match[2]) if match else None


def _client(env: Mapping[str, str], config: Config) -> GitHubClient:
    token, repository = env.get("GITHUB_TOKEN"), env.get("GITHUB_REPOSITORY")
    if not token or not repository:
        raise InputError("--remote needs GITHUB_TOKEN and GITHUB_REPOSITORY")
    api = (env.get("GITHUB_API_URL") or PUBLIC_API).rstrip("/")
    return GitHubClient(token, api, repository, config.github)


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    # Read even when only --remote needs it: a --config that names nothing is a typo.
    config = load_config(args.config, cwd) if args.config or args.remote else None
    results = read_model(args.results, Results, what="results", schema_version=RESULTS_READABLE)
    verdicts = {}
    if args.report:
        report = read_model(args.report, Report, what="report", schema_version=REPORT_READABLE)
        verdicts = {c.id: c.verdict for c in report.cases}
    pr = args.pr if args.pr is not None else _pr_from_event(env)
    record = record_from_results(
        results,
        source=args.source,
        verdicts=verdicts,
        pr=pr,
        tag=args.tag,
        origin=str(args.results),
    )
    if args.remote:
        assert config is not None
        client = _client(env, config)
        outcome, path = append_through_api(
            client, record, branch=args.branch, folder=args.folder, keep=args.keep
        )
        where = f"{path} on {args.branch}"
    else:
        outcome, local = append_local(args.history, record, args.keep)
        where = str(local)
    out.write(f"{outcome}: {record.commit[:12]} ({record.device.identity}) in {where}\n")
    return 0
