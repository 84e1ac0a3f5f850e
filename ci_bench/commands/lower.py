"""``ci-bench lower``: Pallas lowered for a platform this machine lacks (TPU or CUDA), as
each target chip or GPU, no accelerator or plugin needed."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.common_args import (
    add_output,
    add_quiet,
    add_seed,
    add_selection,
    add_shape,
    add_shard,
    add_target,
)
from ci_bench.commands.shared import request_from
from ci_bench.outcome import ERRORS_FAIL, Outcome, exit_code
from ci_bench.pipeline.session import cases_for, load_specs
from ci_bench.report.lowering_table import lowering_table
from ci_bench.store.files import dump_model, write_text

NAME = "lower"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        NAME, help="lower every selected case's Pallas kernel for TPU or CUDA, on this machine"
    )
    add_selection(parser)
    parser.add_argument(
        "--platform",
        required=True,
        help="tpu (Mosaic), or cuda (Triton or Mosaic GPU, as each kernel chose; no CUDA "
        "plugin needed)",
    )
    add_target(parser, "lower each case")
    add_shape(parser)
    add_shard(parser, "lower")
    add_seed(parser, "input shapes")
    add_output(parser, "the lowering JSON")
    add_quiet(parser)


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    """Export every selected case for ``--platform``; exit 1 when any case fails to lower, or
    (TPU) when its cost model does not fit a target chip's VMEM."""
    from ci_bench.pipeline.lowering import lower_all

    request = request_from(args, cwd)
    specs = load_specs(request)
    cases = cases_for(request.selection, specs)
    results = lower_all(request, specs, cases, args.platform, getattr(args, "chip", None) or ())
    if args.output is not None:
        write_text(args.output, dump_model(results), what="lowering", replace=args.force)
    done, chips = results.cases, results.meta.chips
    out.write(lowering_table(done))
    failed = sum(c.status == "error" for c in done)
    host = sum(c.status == "host_error" for c in done)
    fit = f" as {', '.join(chips)}" if chips else ""
    if chips and results.meta.platform == "tpu":
        fit += " and fit VMEM there"
    out.write(
        f"\n\n{len(done) - failed - host}/{len(done)} cases lower for "
        f"{results.meta.platform}{fit}\n"
    )
    if host:
        out.write(
            f"{host} case(s) could not be lowered on this machine (host_error: the machine, "
            "not the kernel; not a failure)\n"
        )
    outcome = Outcome(states={"error": failed}, policy=ERRORS_FAIL)
    return int(exit_code(outcome))
