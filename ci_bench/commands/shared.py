"""What several commands do alike beyond their flags: the request from flags and config, and
a report's files and stdout (``compare`` and ``ab``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from ci_bench.errors import InputError
from ci_bench.pipeline.config import load_config
from ci_bench.pipeline.request import Request, build_request
from ci_bench.report.comment import markdown_report
from ci_bench.report.terminal import terminal_report
from ci_bench.schema import Report
from ci_bench.store.files import dump_chunks, write_text


def request_from(args: argparse.Namespace, cwd: Path) -> Request:
    """Flags + config -> the request (commands without a GitHub event)."""
    flags = vars(args)
    return build_request(flags, load_config(flags.get("config"), cwd))


def emit_report(report: Report, fmt: str, out: TextIO, *, wide: bool = False) -> None:
    if fmt == "json":
        for piece in dump_chunks(report):  # each through the output edge
            out.write(piece)
    elif fmt == "markdown":
        out.write(markdown_report(report))
    else:
        out.write(terminal_report(report, wide=wide))


def write_report_files(
    report: Report, json_path: Path | None, md_path: Path | None, *, replace: bool
) -> None:
    """The report's files; an existing one is replaced only with --force (checked on
    parsing too: this closes the gap between the check and the write)."""
    if json_path:
        write_text(json_path, dump_chunks(report), what="report", replace=replace)
    if md_path:
        write_text(md_path, markdown_report(report), what="markdown", replace=replace)


def check_resume(resume: Path | None) -> None:
    """``--resume`` names a file that exists: a mistyped path must not silently measure
    everything again (exit 2). The shard job's own state file is not this flag."""
    if resume is not None and not resume.exists():
        raise InputError(f"{resume}: results file to resume not found (--resume)")


def check_results(results: Path | None) -> None:
    """``--results`` names a file that exists, for a role that does not read it: it must not
    pass over a mistyped path in silence (exit 2). The report role reads a shards folder
    that is absent when every shard was lost, and says so in its report."""
    if results is not None and not results.exists():
        raise InputError(f"{results}: results file not found (--results)")
