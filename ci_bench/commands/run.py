"""``ci-bench run``, ``list`` and ``schema``: measure the matrix and describe it."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.outcome import Outcome, exit_code
from ci_bench.pipeline.config import load_config
from ci_bench.pipeline.request import Request, build_request
from ci_bench.pipeline.session import cases_for, load_specs, open_bench
from ci_bench.schema import Results
from ci_bench.store.files import dump_model


def request_from(args: argparse.Namespace, cwd: Path) -> Request:
    """Flags + config -> the request (commands without a GitHub event)."""
    flags = vars(args)
    return build_request(flags, load_config(flags.get("config"), cwd))


def cmd_run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    from ci_bench.pipeline.measuring import measure, saver, worker_runs
    from ci_bench.report.render import WIDTH, results_table, run_summary

    request = request_from(args, cwd)
    bench = open_bench(request, load_specs(request), env)
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
        )
        shown = None if output is None else str(output)
        out.write(table + "\n\n" + run_summary(results, shown) + "\n")
    ok = sum(c.status == "ok" for c in results.cases)
    errors = len(results.cases) - ok
    return int(exit_code(Outcome(states={"error": errors}, policy=request.policy, measured=ok)))


def cmd_list(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    request = request_from(args, cwd)
    specs = load_specs(request)
    for name in request.selection.kernels or tuple(specs):
        if name in specs:
            spec = specs[name]
            out.write(f"# {spec.name} v{spec.version}: {spec.description}\n")
    for case in cases_for(request.selection, specs):
        out.write(case.id + "\n")
    return 0


def cmd_schema(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    out.write(json.dumps(Results.model_json_schema(), indent=2) + "\n")
    return 0
