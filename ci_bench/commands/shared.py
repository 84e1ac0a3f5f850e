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


def check_given_file(path: Path | None, what: str, flag: str) -> None:
    """A file flag names a file that exists: a mistyped path must not pass in silence
    (``run --resume`` would measure everything again; a ``ci`` role that reads no
    ``--results`` or ``--ab-report`` would ignore it): exit 2. The shard job's own state
    file and the report role's shards folder and A/B report (absent when that job was lost:
    its report says so) are not checked here."""
    if path is not None and not path.exists():
        raise InputError(f"{path}: {what} not found ({flag})")
