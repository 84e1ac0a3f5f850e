"""``ci-bench profile``: the specification's section 3 (a trace, an HLO dump), one command
away."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ci_bench.commands.common_args import FOLDER, add_case_timeout, add_selection
from ci_bench.commands.shared import request_from
from ci_bench.commands.validate import RUNS_MAX, int_range, path_arg
from ci_bench.errors import InputError
from ci_bench.text import split_list

if TYPE_CHECKING:
    from ci_bench.pipeline.profiling import Profiled

NAME = "profile"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        NAME,
        help="jax.profiler trace of one case under a top-level jit; on a TPU the "
        "specification's unit metrics (MXU, scalar ALU, spills, DMA); HLO dump",
    )
    add_selection(parser)
    FOLDER.on(
        parser.add_argument("--out", type=path_arg, help="folder for trace, LLO and HLO dumps")
    )
    parser.add_argument(
        "--read",
        type=path_arg,
        metavar="TRACE",
        help="print the unit metrics of a saved trace (.xplane.pb, or a folder --out wrote); "
        "no kernel runs",
    )
    parser.add_argument(
        "--dumps",
        type=path_arg,
        metavar="DIR",
        help="--read: libtpu's LLO dump folder (default: llo/ beside the trace)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="run the subject with this tunable's value, e.g. block_m=512 (repeatable)",
    )
    parser.add_argument(
        "--runs", type=int_range(1, RUNS_MAX), default=3, help="traced runs (default 3)"
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument(
        "--dump-hlo", action="store_true", help="dump HLO and buffer assignment via XLA_FLAGS"
    )
    parser.add_argument(
        "--top", type=int_range(0, RUNS_MAX), default=10, help="largest buffers to list"
    )
    add_case_timeout(parser)


def set_values(items: list[str]) -> dict[str, int | str | bool]:
    """``--set block_m=512,block_n=256`` -> {"block_m": 512, "block_n": 256}."""
    values: dict[str, int | str | bool] = {}
    for item in split_list(items):
        name, sep, word = item.partition("=")
        if not sep or not name.strip() or not word.strip():
            raise InputError(f"--set wants NAME=VALUE, got {item!r}")
        word = word.strip()
        flag = {"true": True, "false": False}.get(word.lower())
        values[name.strip()] = (
            flag if flag is not None else int(word) if word.lstrip("-").isdigit() else word
        )
    return values


def _show(profiled: Profiled, fmt: str, out: TextIO) -> None:
    from ci_bench.report.unit_metrics import SOURCE, metrics_table, outside_line

    if fmt == "json":
        return
    if profiled.trace is not None:
        out.write(profiled.trace.describe() + "\n")
    elif profiled.files:
        out.write(f"trace: {profiled.files[0]}\n")
    if profiled.metrics:
        out.write("\n" + metrics_table(profiled.metrics) + "\n")
        out.write(f"({SOURCE})\n")
    if profiled.outside is not None:
        out.write(outside_line(profiled.outside) + "\n")
    if profiled.note:
        out.write(profiled.note + "\n")


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    """Trace cases in a worker each; on a TPU print their unit metrics (section 3.3); with
    --dump-hlo also dump HLO and buffers. ``--read TRACE`` prints a saved trace's metrics.

    One ``--case ID`` writes to ``--out``; several (repeated or comma-separated, e.g. a
    dispatch input) each write to ``--out/<id with / as _>``. The kernel comes from the
    case id when ``--kernel`` is not given.
    """
    from ci_bench.pipeline.profiling import profile_cases, read_saved, saved_traces

    if args.read is not None:
        if not args.read.exists():
            raise InputError(f"profile --read: {args.read} does not exist")
        saved = [read_saved(trace, args.dumps) for trace in saved_traces(args.read)]
        if args.format == "json":
            out.write(json.dumps({"profiles": [p.as_json() for p in saved]}, indent=2) + "\n")
        for profiled in saved:
            _show(profiled, args.format, out)
        return 0
    if args.out is None:
        raise InputError("profile needs --out DIR (or --read TRACE)")
    request = request_from(args, cwd)
    ids = split_list(list(request.selection.case_globs))
    if not ids:
        raise InputError(
            "profile needs a --case ID (repeatable), e.g. matmul/B1-M128-K128-N128/float32"
        )
    chosen = list(request.selection.kernels)
    if len(chosen) > 1:
        raise InputError(f"profile takes at most one --kernel, got {', '.join(chosen)}")
    values = set_values(args.set)
    cases = [
        (
            chosen[0] if chosen else case_id.split("/", 1)[0],
            case_id,
            args.out if len(ids) == 1 else args.out / case_id.replace("/", "_"),
        )
        for case_id in ids
    ]
    found = []
    for (_, case_id, folder), profiled in zip(
        cases, profile_cases(request, env, cases, runs=args.runs, values=values), strict=False
    ):
        found.append(profiled.as_json())
        _show(profiled, args.format, out)
        if args.dump_hlo:
            from ci_bench.measure.hlo import dump_case_hlo

            assert profiled.module is not None
            dump = dump_case_hlo(profiled.module, case_id, folder / "hlo", root=request.config.root)
            if args.format != "json":
                out.write("\n" + dump.describe(args.top) + "\n")
    if args.format == "json":
        out.write(json.dumps({"profiles": found}, indent=2) + "\n")
    return 0
