"""What ``history`` and ``site`` read: history folders, results files and the stored
baselines, combined; and where their commit and PR links point.

``HistorySources.of(args)`` is the one place these flags are read; the rest takes the
typed value.
"""

from __future__ import annotations

import argparse
import gc
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ci_bench.commands.common_args import add_config
from ci_bench.commands.validate import http_url, path_arg
from ci_bench.errors import InputError
from ci_bench.pipeline.config import load_config, resolve
from ci_bench.report.history import Group, build_groups
from ci_bench.schema.history import HistoryRecord
from ci_bench.store.baselines import check_store
from ci_bench.store.history import load_local

_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")


def add_sources(parser: argparse.ArgumentParser) -> None:
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
    add_config(group)


@dataclass(frozen=True)
class HistorySources:
    """The sources flags of ``history`` and ``site``, typed."""

    history: tuple[Path, ...]
    results: tuple[Path, ...]
    baselines_dir: Path | None  # None: the config's
    no_baselines: bool
    repo_url: str | None
    config: Path | None
    kernel: str | None

    @classmethod
    def of(cls, args: argparse.Namespace) -> HistorySources:
        return cls(
            history=tuple(args.history),
            results=tuple(args.results),
            baselines_dir=args.baselines_dir,
            no_baselines=args.no_baselines,
            repo_url=args.repo_url,
            config=args.config,
            kernel=args.kernel,
        )

    def records(self, cwd: Path) -> list[HistoryRecord]:
        config = load_config(self.config, cwd)
        baselines = None
        if not self.no_baselines:
            baselines = self.baselines_dir or resolve(config, config.baselines_dir)
            if self.baselines_dir and not self.baselines_dir.is_dir():
                raise InputError(f"{self.baselines_dir}: baseline folder not found")
            check_store(baselines)  # a file where the folder should be is an error
        return load_local(self.history, self.results, baselines)

    def groups(self, cwd: Path) -> list[Group]:
        """Records read and grouped with the cycle collector paused: 100,000 records are
        millions of acyclic objects, and its full passes over them took most of the time
        (``benchmarks/history_scale.py``); nothing here makes a cycle worth collecting."""
        enabled = gc.isenabled()
        gc.disable()
        try:
            return build_groups(self.records(cwd), self.kernel)
        finally:
            if enabled:
                gc.enable()

    def link_base(self, env: Mapping[str, str]) -> str | None:
        """Where commit and PR links point: only ever a plain http(s) URL (a ``javascript:``
        link in the dashboard would run when clicked)."""
        if self.repo_url:
            return str(self.repo_url)
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
