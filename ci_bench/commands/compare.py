"""``ci-bench compare``, ``promote`` and ``merge``: from results to verdicts and baselines."""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from ci_bench.commands.request import Request
from ci_bench.commands.run import request_from
from ci_bench.errors import InputError
from ci_bench.judge.compare import compare
from ci_bench.report.comment import markdown_report
from ci_bench.report.render import terminal_report
from ci_bench.schema import RESULTS_READABLE, Report, Results
from ci_bench.store.baselines import (
    baseline_path,
    lookups_for,
)
from ci_bench.store.files import atomic_write_text, dump_model, read_model
from ci_bench.store.merge import merge_results
from ci_bench.store.transaction import promote_into


def load_results(path: Path) -> Results:
    return read_model(path, Results, what="results", schema_version=RESULTS_READABLE)


def baseline_report(
    request: Request, results: Results, *, require_confirmation: bool = False
) -> Report:
    """Judge results against the baselines the request names.

    An unfinished run fails through its ``unmeasured`` cases; a version-1 file does not
    know its matrix, so an unfinished one is refused: the gate never passes what it did not
    measure.
    """
    if not results.meta.complete and results.meta.matrix is None:
        raise InputError(
            f"{request.results_path or 'results'}: meta.complete: the run did not finish and "
            "the file (format 1) does not say which cases are missing; re-run it"
        )
    source = request.baselines
    lookups = lookups_for(results, baselines_folder(request), list(source.files), source.pins)
    return compare(
        results,
        lookups,
        request.thresholds,
        request.policy,
        require_confirmation=require_confirmation,
    )


def baselines_folder(request: Request) -> Path:
    """The baseline folder to read: the store itself, or its copy at the request's ref."""
    source = request.baselines
    if source.ref is None:
        return source.folder
    from ci_bench.commands.git import export_folder

    scratch = request.out_dir / "baselines-at-base"
    shutil.rmtree(scratch, ignore_errors=True)
    return export_folder(request.config.root, source.ref, source.folder, scratch)


def emit_report(report: Report, fmt: str, out: TextIO) -> None:
    if fmt == "json":
        out.write(dump_model(report))
    elif fmt == "markdown":
        out.write(markdown_report(report))
    else:
        out.write(terminal_report(report))


def write_report_files(report: Report, json_path: Path | None, md_path: Path | None) -> None:
    if json_path:
        atomic_write_text(json_path, dump_model(report))
    if md_path:
        atomic_write_text(md_path, markdown_report(report))


def cmd_compare(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    request = request_from(args, cwd)
    assert request.results_path is not None
    report = baseline_report(request, load_results(request.results_path))
    write_report_files(report, request.output, args.markdown)
    emit_report(report, request.fmt, out)
    return report.exit_code


def cmd_promote(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    request = request_from(args, cwd)
    assert request.results_path is not None
    results = load_results(request.results_path)
    folder = request.baselines.folder
    promotions = promote_into(
        folder,
        results,
        promoted_at=datetime.now(UTC),
        tag=args.tag,
        force=args.force,
        source=str(request.results_path),
    )
    for p in promotions:
        path = baseline_path(folder, p.kernel, p.version)
        out.write(f"{p.action}: {path} ({p.device})\n")
    return 0


def cmd_merge(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    parts = [(str(path), load_results(path)) for path in args.parts]
    merged = merge_results(parts)
    atomic_write_text(args.output, dump_model(merged))
    out.write(f"merged {len(merged.cases)} cases from {len(parts)} files into {args.output}\n")
    return 0
