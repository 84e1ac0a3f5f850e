"""``ci-bench run``: measure the matrix (or an ad-hoc ``--shape``) and print a table."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.common_args import add_measurement, add_selection, add_shape, add_wide
from ci_bench.commands.shared import check_given_file, request_from
from ci_bench.commands.validate import Output, path_arg
from ci_bench.outcome import Outcome, exit_code
from ci_bench.pipeline.kernels import head_kernels
from ci_bench.pipeline.session import open_bench
from ci_bench.schema.platforms import LOWERING_NAMES
from ci_bench.store.files import dump_model

NAME = "run"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(NAME, help="run the benchmark matrix and print a table")
    add_selection(parser)
    add_measurement(parser)
    add_shape(parser)
    parser.add_argument(
        "--lower",
        choices=LOWERING_NAMES,
        help="first lower each case for this platform; a case that cannot is an error",
    )
    # A resumed run rewrites the file it resumes: that is what it is for.
    Output("file", "resume").on(
        parser.add_argument("--output", "-o", type=path_arg, help="write the results JSON here")
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --output file (otherwise refused: results are never lost)",
    )
    parser.add_argument(
        "--format",
        choices=("table", "json", "markdown"),
        default="table",
        help="what to print on stdout",
    )
    add_wide(parser)


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    from ci_bench.pipeline.measuring import measure, saver, worker_runs
    from ci_bench.report.render import WIDTH, results_table, run_summary

    request = request_from(args, cwd)
    check_given_file(request.inputs.resume, "results file to resume", "--resume")
    # The kernels are described by the worker that then measures (never imported here).
    head = head_kernels(request, env, measuring=True)
    bench = open_bench(request, head.specs, env, device=head.device, process=head.process)
    output = request.outputs.output if request.outputs.output is not None else request.inputs.resume
    with worker_runs(bench) as runs:
        replace = bool(args.force) or output == request.inputs.resume  # --resume grows its own file
        results = measure(bench, runs, saver(output, replace=replace), resume=request.inputs.resume)
    if output is not None:
        bench.progress.note(f"results written to {output}")
    if request.outputs.fmt == "json":
        out.write(dump_model(results))
    else:
        table = results_table(
            results.cases,
            "github" if request.outputs.fmt == "markdown" else "simple",
            interpreted=results.meta.settings.interpret,
            width=None if getattr(args, "wide", False) else WIDTH,
            # Each kernel's own mode (config cpu-interpret-tpu, its SPEC): what ran it.
            interpreters={bench.harness.interpret_for(c.kernel) for c in results.cases},
        )
        shown = None if output is None else str(output)
        out.write(table + "\n\n" + run_summary(results, shown) + "\n")
    ok = sum(c.status == "ok" for c in results.cases)
    errors = len(results.cases) - ok
    return int(exit_code(Outcome(states={"error": errors}, policy=request.policy, measured=ok)))
