"""``ci-bench record``, ``history``, ``site`` and ``export``: the history of a kernel.

``register`` adds the subcommands to the parser; handlers read files, the environment and
the clock, and hand plain values to store / judge / report.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from ci_bench.commands.validate import Output, http_url, int_range, path_arg
from ci_bench.errors import ExitCode, InputError
from ci_bench.github.api import GitHubClient
from ci_bench.github.context import PUBLIC_API
from ci_bench.github.history import append_through_api
from ci_bench.pipeline.config import Config, load_config, resolve
from ci_bench.report.export import FORMATS, export
from ci_bench.report.history import build_groups, changes_text, finite
from ci_bench.report.site import site_files
from ci_bench.schema.base import json_text
from ci_bench.schema.history import HistoryRecord
from ci_bench.schema.report import REPORT_READABLE, Report
from ci_bench.schema.results import RESULTS_READABLE, Results
from ci_bench.store.baselines import check_store
from ci_bench.store.files import read_json, read_model, write_text
from ci_bench.store.history import (
    DATA_BRANCH,
    DEFAULT_KEEP,
    append_local,
    load_local,
    record_from_results,
)

_PR_IN_MESSAGE = re.compile(r"\(#(\d+)\)\s*$|^Merge pull request #(\d+)", re.MULTILINE)
_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")
KEEP_MAX = 100_000
PR_MAX = 2**31 - 1


def _add_sources(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("history sources (combined)")
    group.add_argument(
        "--history",
        type=path_arg,
        action="append",
        default=[],
        metavar="DIR",
        help="folder of history *.jsonl (a checkout of the data branch) and results *.json",
    )
    group.add_argument(
        "--results",
        type=path_arg,
        action="append",
        default=[],
        metavar="FILE",
        help="a results file (repeatable)",
    )
    group.add_argument(
        "--baselines-dir",
        type=path_arg,
        help="baseline folder (default: config; skipped if absent)",
    )
    group.add_argument("--no-baselines", action="store_true", help="leave stored baselines out")
    group.add_argument(
        "--repo-url",
        type=http_url,
        help="https://github.com/OWNER/REPO for commit and PR links "
        "(default: GITHUB_SERVER_URL/GITHUB_REPOSITORY)",
    )
    group.add_argument("--config", type=path_arg, help="pyproject.toml with [tool.ci-bench]")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``record``, ``history``, ``site`` and ``export`` to ``ci-bench``."""
    record = sub.add_parser("record", help="append a results file to the history store")
    record.add_argument("results", type=path_arg)
    where = record.add_mutually_exclusive_group(required=True)
    Output("folder").on(
        where.add_argument("--history", type=path_arg, metavar="DIR", help="local history folder")
    )
    where.add_argument(
        "--remote",
        action="store_true",
        help=f"the data branch through the contents API (GITHUB_TOKEN; default {DATA_BRANCH})",
    )
    record.add_argument("--branch", default=DATA_BRANCH, help="data branch (with --remote)")
    record.add_argument("--folder", default="history", help="folder on the data branch")
    record.add_argument("--report", type=path_arg, help="report.json: store each case's verdict")
    record.add_argument("--source", choices=("run", "promotion"), default="run")
    record.add_argument("--tag", help="release tag (promotions)")
    record.add_argument(
        "--pr", type=int_range(1, PR_MAX), help="pull request number (default: from the event)"
    )
    record.add_argument(
        "--keep",
        type=int_range(1, KEEP_MAX),
        default=DEFAULT_KEEP,
        help=f"records kept per device ({DEFAULT_KEEP})",
    )
    record.add_argument("--config", type=path_arg, help="pyproject.toml with [tool.ci-bench]")

    history = sub.add_parser("history", help="commits where a case's level changed (PELT)")
    history.add_argument("--kernel", help="only this kernel")
    history.add_argument("--format", choices=("text", "json"), default="text")
    _add_sources(history)

    site = sub.add_parser("site", help="static dashboard of the history (file:// and Pages)")
    Output("folder").on(
        site.add_argument(
            "--out",
            type=path_arg,
            required=True,
            help="folder to write the site to (its files are rewritten: a generated folder)",
        )
    )
    site.add_argument("--kernel", help="only this kernel")
    site.add_argument("--title", default="ci-bench: kernel performance history")
    _add_sources(site)

    exp = sub.add_parser("export", help="a results file as Bencher BMF or github-action-benchmark")
    exp.add_argument("results", type=path_arg)
    exp.add_argument("--format", choices=FORMATS, required=True)
    Output("file").on(
        exp.add_argument("--output", "-o", type=path_arg, help="write here instead of stdout")
    )
    exp.add_argument("--force", action="store_true", help="replace an existing --output file")


def _load_results(path: Path) -> Results:
    return read_model(path, Results, what="results", schema_version=RESULTS_READABLE)


def _repo_url(args: argparse.Namespace, env: Mapping[str, str]) -> str | None:
    """Where commit and PR links point: only ever a plain http(s) URL (a ``javascript:``
    link in the dashboard would run when clicked)."""
    if args.repo_url:
        return str(args.repo_url)
    repository = env.get("GITHUB_REPOSITORY")
    if not repository:
        return None
    if not _REPOSITORY.fullmatch(repository):
        raise InputError(f"GITHUB_REPOSITORY: {repository[:80]!r} is not OWNER/REPO")
    server = env.get("GITHUB_SERVER_URL") or "https://github.com"
    try:
        return http_url(f"{server.rstrip('/')}/{repository}")
    except argparse.ArgumentTypeError:
        raise InputError(f"GITHUB_SERVER_URL: {server[:80]!r} is not an http(s) URL") from None


def _records(args: argparse.Namespace, cwd: Path) -> list[HistoryRecord]:
    config = load_config(args.config, cwd)
    baselines = None
    if not args.no_baselines:
        baselines = args.baselines_dir or resolve(config, config.baselines_dir)
        if args.baselines_dir and not args.baselines_dir.is_dir():
            raise InputError(f"{args.baselines_dir}: baseline folder not found")
        check_store(baselines)  # a file where the folder should be is an error
    return load_local(args.history, args.results, baselines)


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


def cmd_record(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    # Read even when only --remote needs it: a --config that names nothing is a typo.
    config = load_config(args.config, cwd) if args.config or args.remote else None
    results = _load_results(args.results)
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


def cmd_history(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    groups = build_groups(_records(args, cwd), args.kernel)
    if not groups:
        what = f"kernel {args.kernel}" if args.kernel else "any kernel"
        raise InputError(f"no history for {what} in the given sources")
    repo_url = _repo_url(args, env)
    if args.format == "json":
        rows = [
            {
                "kernel": g.kernel,
                "device": g.device,
                "case": c.case,
                "commit": c.commit.sha,
                "previous": c.previous.sha,
                "pr": c.commit.pr,
                "version": c.commit.version,
                "previous_version": c.previous.version,
                "before_ms": finite(c.point.before),
                "after_ms": finite(c.point.after),
                "change": finite(c.point.change),
                "url": f"{repo_url}/commit/{c.commit.sha}" if repo_url else None,
            }
            for g in groups
            for s in g.cases.values()
            for c in s.changes
        ]
        out.write(json_text(rows))
    else:
        out.write(changes_text(groups, repo_url))
    return 0


def cmd_site(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    groups = build_groups(_records(args, cwd), args.kernel)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    files = site_files(groups, repo_url=_repo_url(args, env), title=args.title, generated_at=stamp)
    for name, text in files.items():
        # A generated folder: its files are rewritten. Web servers and the Pages artifact
        # need world-readable files, whatever the umask.
        write_text(args.out / name, text, what="site", replace=True, mode=0o644)
    cases = sum(len(g.cases) for g in groups)
    commits = max((len(g.commits) for g in groups), default=0)
    out.write(
        f"wrote {args.out / 'index.html'}: {len(groups)} kernel/device group(s), "
        f"{cases} case(s), up to {commits} commit(s)\n"
    )
    if not groups:  # exit 3 says why and what comes next
        sys.stderr.write(
            "ci-bench: nothing recorded yet (exit 3): the page says so; `ci-bench record "
            "RESULTS --history DIR` fills the history (`ci-bench run -o RESULTS` first)\n"
        )
    return 0 if groups else int(ExitCode.NOTHING_MEASURED)


def cmd_export(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    results = _load_results(args.results)
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


COMMANDS = {
    "record": cmd_record,
    "history": cmd_history,
    "site": cmd_site,
    "export": cmd_export,
}
