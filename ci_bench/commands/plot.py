"""``ci-bench plot``: the roofline chart (PNG) of a results file, a baseline's beside it."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.common_args import FILE, add_force
from ci_bench.commands.validate import PEAK_MAX, path_arg, positive_float
from ci_bench.pipeline.judging import load_results

NAME = "plot"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(NAME, help="roofline chart (PNG) of a results file")
    parser.add_argument("results", type=path_arg)
    FILE.on(parser.add_argument("--out", "-o", type=path_arg, default=Path("roofline.png")))
    add_force(parser, "--out file")
    parser.add_argument(
        "--baseline", type=path_arg, help="results file drawn beside the current one"
    )
    parser.add_argument(
        "--peak-tflops", type=positive_float(PEAK_MAX), help="compute roof (TFLOPS)"
    )
    parser.add_argument("--peak-gbps", type=positive_float(PEAK_MAX), help="memory roof (GB/s)")


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    from ci_bench.measure.roofline import table_peaks
    from ci_bench.report.plot import png_bytes
    from ci_bench.store.files import write_bytes

    results = load_results(args.results)
    baseline = load_results(args.baseline) if args.baseline else None
    data = png_bytes(
        results,
        baseline=baseline,
        peak_tflops=args.peak_tflops,
        peak_gbps=args.peak_gbps,
        table=table_peaks(results),
    )
    write_bytes(args.out, data, what="roofline chart", replace=args.force)
    out.write(f"roofline chart written to {args.out}\n")
    return 0
