"""``ci-bench compare``, ``promote`` and ``merge``: from results to verdicts and baselines."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from ci_bench.commands.run import request_from
from ci_bench.pipeline.judging import baseline_report, load_results
from ci_bench.report.comment import markdown_report
from ci_bench.report.terminal import terminal_report
from ci_bench.schema import Report
from ci_bench.store.baselines import baseline_path
from ci_bench.store.files import dump_model, write_text
from ci_bench.store.merge import merge_results
from ci_bench.store.transaction import promote_into


def emit_report(report: Report, fmt: str, out: TextIO, *, wide: bool = False) -> None:
    if fmt == "json":
        out.write(dump_model(report))
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
        write_text(json_path, dump_model(report), what="report", replace=replace)
    if md_path:
        write_text(md_path, markdown_report(report), what="markdown", replace=replace)


def cmd_compare(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    request = request_from(args, cwd)
    assert request.inputs.results is not None
    report = baseline_report(request, load_results(request.inputs.results))
    write_report_files(report, request.outputs.output, args.markdown, replace=args.force)
    emit_report(report, request.outputs.fmt, out, wide=args.wide)
    return report.exit_code


def cmd_promote(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    request = request_from(args, cwd)
    assert request.inputs.results is not None
    results = load_results(request.inputs.results)
    folder = request.baselines.folder
    promotions = promote_into(
        folder,
        results,
        promoted_at=datetime.now(UTC),
        tag=args.tag,
        force=args.force,
        source=str(request.inputs.results),
    )
    for p in promotions:
        path = baseline_path(folder, p.kernel, p.version)
        out.write(f"{p.action}: {path} ({p.device})\n")
    return 0


def cmd_merge(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    parts = [(str(path), load_results(path)) for path in args.parts]
    merged = merge_results(parts)
    write_text(args.output, dump_model(merged), what="merged results", replace=args.force)
    out.write(f"merged {len(merged.cases)} cases from {len(parts)} files into {args.output}\n")
    return 0
