"""``ci-bench tune``: block sizes (any declared tunables) searched by the cost model on a CPU.

Per case, every candidate of the SPEC's ``tunables`` is checked against its constraints,
traced, modelled and lowered as each target TPU chip, then ranked by modelled time
(``ci_bench.pipeline.tuning``); ``--measure K`` times the model's top K and the default on
the accelerator; ``--write`` keeps each chip's winner as data beside the baselines
(docs/TUNE.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ci_bench.commands.common_args import (
    add_chip,
    add_output,
    add_quiet,
    add_rounds,
    add_seed,
    add_selection,
    add_shape,
    add_timer,
)
from ci_bench.commands.shared import request_from
from ci_bench.commands.validate import int_range
from ci_bench.errors import ExitCode, InputError

if TYPE_CHECKING:
    from ci_bench.schema.tune import TunedCase

NAME = "tune"
MEASURE_MAX = 32
TOP_MAX = 10_000
CPU_REFUSAL = (
    "tune --measure times kernels on the accelerator: on a CPU the Pallas interpreter's "
    "times are not kernel performance (without --measure, tune ranks by the cost model "
    "on any machine)"
)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    tune = sub.add_parser(
        NAME,
        help="search the kernels' declared tunables (block sizes) with the cost model on this "
        "CPU: every candidate traced, lowered for TPU and modelled per chip, then ranked",
    )
    add_selection(tune)
    add_chip(tune, "trace, lower and model each candidate")
    tune.add_argument(
        "--values",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="search these values of one tunable instead of the SPEC's (repeatable)",
    )
    add_shape(tune, "4096,4096,4096")
    tune.add_argument(
        "--top", type=int_range(1, TOP_MAX), default=10, help="rows per chip in the table"
    )
    tune.add_argument("--format", choices=("table", "json"), default="table")
    add_output(tune, "the search's JSON", force=None)
    tune.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --output file, or --write entries for the same cases",
    )
    tune.add_argument(
        "--write",
        action="store_true",
        help="keep each chip's winner in <baselines>/<kernel>_v<version>.tuned.<chip>.json",
    )
    tune.add_argument(
        "--measure",
        type=int_range(1, MEASURE_MAX),
        metavar="K",
        help="on the accelerator: time the model's top K and the default, interleaved",
    )
    add_rounds(tune, "--measure: warmup calls", "--measure: timed rounds")
    add_timer(tune)
    tune.add_argument(
        "--measure-on-cpu",
        action="store_true",
        help=argparse.SUPPRESS,  # tests only: interpret-mode times are not kernel performance
    )
    add_seed(tune)
    add_quiet(tune)


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    from ci_bench.measure.model.chips import resolve_chips
    from ci_bench.pipeline.session import load_specs
    from ci_bench.pipeline.tuning import parse_values, tune_cases
    from ci_bench.report.tune import tune_table
    from ci_bench.store.files import dump_model, write_text

    if args.measure and not args.measure_on_cpu:
        import jax

        if jax.default_backend() == "cpu":
            raise InputError(CPU_REFUSAL)
    request = request_from(args, cwd)
    chips = resolve_chips(args.chip, request.config.target_chips)
    specs = load_specs(request)
    overrides = parse_values(args.values)

    def progress(line: str) -> None:
        if not args.quiet:
            sys.stderr.write(line + "\n")

    written: set[Path] = set()

    def keep(case: TunedCase) -> None:  # --write: each case as it is done, never at the end
        from ci_bench.pipeline.tuned import kept_current, winner, write_tuned_cases

        folder = request.baselines.folder
        for path in write_tuned_cases([case], chips, folder, replace=args.force, specs=specs):
            if path not in written:
                progress(f"tuned configs written to {path}")
            written.add(path)
        for chip in chips:
            message = kept_message(case, chip)
            if message is not None:
                progress(message)
        for chip in case.tied:
            if winner(case, chip) is None and not kept_current(case, chip):
                progress(
                    f"{case.id}: not written for {chip}: {len(case.tied[chip])} configs "
                    "tie by the model; --measure K on that chip breaks the tie"
                )

    if args.write:  # refused before anything is measured, not after the first case
        from ci_bench.pipeline.session import cases_for
        from ci_bench.pipeline.tuned import check_writable

        selected = [c for c in cases_for(request.selection, specs) if specs[c.kernel].tunables]
        check_writable(
            selected, chips, request.baselines.folder, specs, replace=args.force
        )  # fmt: skip
    report = tune_cases(
        request, specs, chips, overrides, progress, measure=args.measure or 0,
        on_case=keep if args.write else None,
    )  # fmt: skip
    if args.output is not None:
        write_text(args.output, dump_model(report), what="tune results", replace=args.force)
    out.write(dump_model(report) if args.format == "json" else tune_table(report, args.top))
    ranked = any(case.best for case in report.cases)
    if args.measure:  # exit 0 when any candidate was timed, whatever did not compile
        ranked = any(case.measured for case in report.cases)
    return int(ExitCode.OK if ranked else ExitCode.NOTHING_MEASURED)


def kept_message(case: TunedCase, chip: str) -> str | None:
    """The line ``--write`` says for a case it leaves as it runs (``kept_current``)."""
    from ci_bench.pipeline.tuned import kept_current

    if case.current is None or not kept_current(case, chip):
        return None
    return (
        f"{case.id}: not written for {chip}: as it runs now it measured "
        f"{case.current.median_ms:,.4f} ms, no candidate faster (its tuned entry, or the "
        "kernel's fallback, stays)"
    )
