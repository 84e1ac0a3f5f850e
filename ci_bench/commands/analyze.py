"""``ci-bench analyze``: the cost model read from each case's Pallas grid, per TPU chip or GPU.

No accelerator, nothing executed (``ci_bench.pipeline.analysis``). ``--base REF`` also
models the base's kernels and judges every case against them, exactly.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.common_args import (
    add_case_timeout,
    add_deviceless,
    add_fail_on,
    add_output,
    add_quiet,
    add_seed,
    add_selection,
    add_shape,
    add_target,
)
from ci_bench.commands.shared import request_from
from ci_bench.pipeline.kernels import head_kernels
from ci_bench.store.files import dump_model, write_text

NAME = "analyze"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    analyze = sub.add_parser(
        NAME,
        help="the cost model read from the Pallas grid: HBM bytes, grid steps, VMEM and "
        "modelled time per TPU chip or GPU (no accelerator; nothing is executed)",
    )
    add_selection(analyze)
    add_target(analyze, "trace and model each case")
    analyze.add_argument("--format", choices=("table", "json"), default="table")
    add_output(analyze, "the analysis JSON")
    analyze.add_argument(
        "--base",
        metavar="REF",
        help="also model the kernels at this git ref and judge each case against them",
    )
    add_fail_on(analyze)
    add_shape(analyze)
    add_seed(analyze)
    add_case_timeout(analyze)
    add_deviceless(analyze, "trace every case")
    add_quiet(analyze)


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    # --output was checked when the command line was parsed (Output), before any tracing.
    from ci_bench.measure.deviceless import worker_environment
    from ci_bench.measure.model.targets import resolve_targets
    from ci_bench.pipeline.analysis import analyze_cases
    from ci_bench.report.analysis import analysis_table

    request = request_from(args, cwd)
    chips = resolve_targets(args.chip, request.config.target_chips)
    # Described and modelled in a worker (CPU only): no kernel code runs here.
    head = head_kernels(request, worker_environment(env, args.deviceless), measuring=False)

    def progress(line: str) -> None:
        if not args.quiet:
            sys.stderr.write(line + "\n")

    with head.process:
        analysis = analyze_cases(request, head, chips, progress)
    if args.output is not None:
        write_text(args.output, dump_model(analysis), what="analysis", replace=args.force)
    out.write(dump_model(analysis) if args.format == "json" else analysis_table(analysis))
    return analysis.exit_code
