"""``ci-bench site``: the static dashboard of the history (file:// and GitHub Pages)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from ci_bench.commands.common_args import FOLDER
from ci_bench.commands.history_sources import HistorySources, add_sources
from ci_bench.commands.validate import path_arg
from ci_bench.errors import ExitCode
from ci_bench.report.site import site_files
from ci_bench.store.writer import write_folder_files

NAME = "site"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(NAME, help="static dashboard of the history (file:// and Pages)")
    FOLDER.on(
        parser.add_argument(
            "--out",
            type=path_arg,
            required=True,
            help="folder to write the site to (its files are rewritten: a generated folder)",
        )
    )
    parser.add_argument("--kernel", help="only this kernel")
    parser.add_argument("--title", default="ci-bench: kernel performance history")
    add_sources(parser)


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    sources = HistorySources.of(args)
    folder: Path = args.out
    groups = sources.groups(cwd)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    files = site_files(
        groups, repo_url=sources.link_base(env), title=args.title, generated_at=stamp
    )
    # A generated folder: its files are rewritten, all or none (a page never beside an old
    # data file). Web servers and the Pages artifact need world-readable files.
    write_folder_files(folder, files, what="site", mode=0o644)
    cases = sum(len(g.cases) for g in groups)
    commits = max((len(g.commits) for g in groups), default=0)
    out.write(
        f"wrote {folder / 'index.html'}: {len(groups)} kernel/device group(s), "
        f"{cases} case(s), up to {commits} commit(s)\n"
    )
    if not groups:  # exit 3 says why and what comes next
        sys.stderr.write(
            "ci-bench: nothing recorded yet (exit 3): the page says so; `ci-bench record "
            "RESULTS --history DIR` fills the history (`ci-bench run -o RESULTS` first)\n"
        )
    return 0 if groups else int(ExitCode.NOTHING_MEASURED)
