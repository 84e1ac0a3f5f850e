"""``ci-bench profile``: the specification's section 3 (a trace, an HLO dump), one command
away."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.common_args import FOLDER, add_selection
from ci_bench.commands.shared import request_from
from ci_bench.commands.validate import RUNS_MAX, int_range, path_arg
from ci_bench.errors import InputError
from ci_bench.pipeline.session import load_specs
from ci_bench.text import split_list

NAME = "profile"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        NAME, help="jax.profiler trace of one case under a top-level jit; HLO dump"
    )
    add_selection(parser)
    FOLDER.on(
        parser.add_argument(
            "--out", type=path_arg, required=True, help="folder for trace and dumps"
        )
    )
    parser.add_argument(
        "--runs", type=int_range(1, RUNS_MAX), default=3, help="traced runs (default 3)"
    )
    parser.add_argument(
        "--dump-hlo", action="store_true", help="dump HLO and buffer assignment via XLA_FLAGS"
    )
    parser.add_argument(
        "--top", type=int_range(0, RUNS_MAX), default=10, help="largest buffers to list"
    )


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    """Trace cases under a top-level jit; with --dump-hlo also dump HLO and buffers.

    One ``--case ID`` writes to ``--out``; several (repeated or comma-separated, e.g. a
    dispatch input) each write to ``--out/<id with / as _>``. The kernel comes from the
    case id when ``--kernel`` is not given.
    """
    from ci_bench.contract.registry import kernel_module
    from ci_bench.measure.hlo import dump_case_hlo
    from ci_bench.measure.profiling import trace_case

    request = request_from(args, cwd)
    config, specs = request.config, load_specs(request)
    ids = split_list(list(request.selection.case_globs))
    if not ids:
        raise InputError(
            "profile needs a --case ID (repeatable), e.g. matmul/B1-M128-K128-N128/float32"
        )
    chosen = list(request.selection.kernels)
    if len(chosen) > 1:
        raise InputError(f"profile takes at most one --kernel, got {', '.join(chosen)}")
    if args.runs < 1:
        raise InputError("--runs must be >= 1")
    for case_id in ids:
        name = chosen[0] if chosen else case_id.split("/", 1)[0]
        if name not in specs:
            known = ", ".join(specs)
            raise InputError(f"profile: {case_id}: unknown kernel {name!r} (known: {known})")
        spec = specs[name]
        out_dir: Path = args.out if len(ids) == 1 else args.out / case_id.replace("/", "_")
        info = trace_case(spec, case_id, out_dir / "trace", runs=args.runs, seed=config.seed)
        out.write(info.describe() + "\n")
        if args.dump_hlo:
            module = kernel_module(request.modules, spec.name, config.root)
            dump = dump_case_hlo(module, case_id, out_dir / "hlo", root=config.root)
            out.write("\n" + dump.describe(args.top) + "\n")
    return 0
