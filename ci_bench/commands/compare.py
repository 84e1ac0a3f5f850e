"""``ci-bench compare``, ``promote`` and ``merge``: from results to verdicts and baselines."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from ci_bench.commands.config import Config, load_config, resolve
from ci_bench.errors import InputError
from ci_bench.judge.compare import compare
from ci_bench.report.render import markdown_report, terminal_report
from ci_bench.schema import RESULTS_SCHEMA_VERSION, FailPolicy, Report, Results
from ci_bench.store.baselines import (
    Lookup,
    baseline_path,
    find_baseline,
    load_baseline,
    plan_promotions,
    write_promotions,
)
from ci_bench.store.files import atomic_write_text, dump_model, read_model
from ci_bench.store.merge import merge_results

FAIL_STATES = ("error", "missing", "noisy")


def load_results(path: Path) -> Results:
    return read_model(path, Results, what="results", schema_version=RESULTS_SCHEMA_VERSION)


def parse_fail_on(text: str | None, default: FailPolicy) -> FailPolicy:
    """``error,noisy`` -> policy; ``none`` -> regressions only."""
    if text is None:
        return default
    states = {s.strip() for s in text.split(",") if s.strip()} - {"none"}
    unknown = states - set(FAIL_STATES)
    if unknown:
        raise InputError(
            f"--fail-on: unknown state(s) {', '.join(sorted(unknown))}; "
            f"choose from {', '.join(FAIL_STATES)} or none"
        )
    return FailPolicy(**{s: s in states for s in FAIL_STATES})


def baselines_dir(args: argparse.Namespace, config: Config) -> Path:
    return args.baselines_dir or resolve(config, config.baselines_dir)


def lookups_for(
    results: Results, folder: Path, files: list[Path], pinned: str | None
) -> dict[str, Lookup]:
    """One baseline lookup per kernel: explicit files first, else the store's rule."""
    explicit = {}
    for path in files:
        baseline = load_baseline(path)
        explicit[baseline.kernel] = Lookup(baseline.kernel, "", path, baseline, None)
    lookups = {}
    for kernel, version in results.meta.kernels.items():
        if kernel in explicit:
            given = explicit[kernel]
            note = None
            if given.baseline and given.baseline.version != version:
                note = f"compared with v{given.baseline.version} ({given.path})"
            lookups[kernel] = Lookup(kernel, version, given.path, given.baseline, note)
        else:
            lookups[kernel] = find_baseline(folder, kernel, version, pinned)
    stray = set(explicit) - set(lookups)
    if stray:
        raise InputError(f"--baseline: no results for kernel {', '.join(sorted(stray))}")
    return lookups


def build_report(args: argparse.Namespace, config: Config) -> Report:
    results = load_results(args.results)
    lookups = lookups_for(
        results, baselines_dir(args, config), args.baseline, args.baseline_version
    )
    policy = parse_fail_on(args.fail_on, config.fail_on)
    return compare(results, lookups, config.thresholds, policy)


def emit_report(report: Report, fmt: str, out: TextIO) -> None:
    if fmt == "json":
        out.write(dump_model(report))
    elif fmt == "markdown":
        out.write(markdown_report(report))
    else:
        out.write(terminal_report(report))


def cmd_compare(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    config = load_config(args.config, cwd)
    report = build_report(args, config)
    if args.output:
        atomic_write_text(args.output, dump_model(report))
    if args.markdown:
        atomic_write_text(args.markdown, markdown_report(report))
    emit_report(report, args.format, out)
    return report.exit_code


def cmd_promote(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    config = load_config(args.config, cwd)
    results = load_results(args.results)
    folder = baselines_dir(args, config)
    existing = {}
    for kernel, version in results.meta.kernels.items():
        path = baseline_path(folder, kernel, version)
        existing[kernel] = load_baseline(path, kernel) if path.is_file() else None
    promotions = plan_promotions(
        results,
        existing,
        promoted_at=datetime.now(UTC),
        tag=args.tag,
        force=args.force,
        source=str(args.results),
    )
    write_promotions(folder, promotions)
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
