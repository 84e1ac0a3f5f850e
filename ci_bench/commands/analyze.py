"""``ci-bench analyze``: the cost model read from each case's Pallas grid, per TPU chip.

No accelerator, nothing executed (``ci_bench.pipeline.analysis``). ``--base REF`` also
models the base's kernels and judges every case against them, exactly.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.common_args import add_chip
from ci_bench.commands.run import request_from
from ci_bench.commands.validate import SEED_MAX, Output, int_range, path_arg, shape
from ci_bench.pipeline.session import load_specs
from ci_bench.store.files import dump_model, write_text


def register(sub: argparse._SubParsersAction, add_selection: Callable) -> None:  # type: ignore[type-arg]
    """Add ``analyze`` (with the usual selection flags) to ``ci-bench``."""
    analyze = sub.add_parser(
        "analyze",
        help="the cost model read from the Pallas grid: HBM bytes, grid steps, VMEM and "
        "modelled time per TPU chip (no accelerator; nothing is executed)",
    )
    add_selection(analyze)
    add_chip(analyze, "trace and model each case")
    analyze.add_argument("--format", choices=("table", "json"), default="table")
    Output("file").on(
        analyze.add_argument("--output", "-o", type=path_arg, help="write the analysis JSON here")
    )
    analyze.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --output file (otherwise refused: nothing is replaced silently)",
    )
    analyze.add_argument(
        "--base",
        metavar="REF",
        help="also model the kernels at this git ref and judge each case against them",
    )
    analyze.add_argument("--fail-on", metavar="STATES", help="as for compare (default: config)")
    analyze.add_argument(
        "--shape", type=shape, help="ad-hoc case, e.g. 1024,1024,1024 (with --dtype)"
    )
    analyze.add_argument("--dtype", default="bfloat16", help="dtype of the --shape case")
    analyze.add_argument(
        "--seed", type=int_range(0, SEED_MAX), help="PRNG seed for inputs (default 42)"
    )
    analyze.add_argument("--quiet", "-q", action="store_true", help="no progress lines")


def cmd_analyze(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    # --output was checked when the command line was parsed (Output), before any tracing.
    from ci_bench.measure.model.chips import resolve_chips
    from ci_bench.pipeline.analysis import analyze_cases
    from ci_bench.report.analysis import analysis_table

    request = request_from(args, cwd)
    chips = resolve_chips(args.chip, request.config.target_chips)
    specs = load_specs(request)

    def progress(line: str) -> None:
        if not args.quiet:
            sys.stderr.write(line + "\n")

    analysis = analyze_cases(request, specs, chips, progress)
    if args.output is not None:
        write_text(args.output, dump_model(analysis), what="analysis", replace=args.force)
    out.write(dump_model(analysis) if args.format == "json" else analysis_table(analysis))
    return analysis.exit_code


COMMANDS = {"analyze": cmd_analyze}
