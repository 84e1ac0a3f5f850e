"""``ci-bench history``: the commits where a case's level changed (PELT), from the
combined history sources (``history_sources``)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.history_sources import HistorySources, add_sources
from ci_bench.errors import InputError
from ci_bench.report.history import changes_text, finite
from ci_bench.schema.base import json_text

NAME = "history"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(NAME, help="commits where a case's level changed (PELT)")
    parser.add_argument("--kernel", help="only this kernel")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    add_sources(parser)


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    sources = HistorySources.of(args)
    groups = sources.groups(cwd)
    if not groups:
        what = f"kernel {sources.kernel}" if sources.kernel else "any kernel"
        raise InputError(f"no history for {what} in the given sources")
    repo_url = sources.link_base(env)
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
