"""``ci-bench check-spec``: kernel SPECs validated without running them; with ``--run``,
every case of the pull request's profile run once for correctness (no timing reported), so
a tolerance too tight at a ``ci`` shape shows before the pull request, not in ``preview``."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.common_args import add_config
from ci_bench.contract.spec import PROFILES
from ci_bench.errors import ExitCode, InputError
from ci_bench.text import split_list

NAME = "check-spec"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        NAME,
        help="validate kernel SPECs without running them (default: the config's); --run: "
        "each case of the ci profile once, for correctness",
    )
    parser.add_argument(
        "modules", nargs="*", metavar="MODULE", help="module name or .py file exposing SPEC"
    )
    add_config(parser)
    parser.add_argument(
        "--run",
        nargs="?",
        const="ci",
        choices=PROFILES,
        metavar="PROFILE",
        help="then run every case of PROFILE (default ci: the pull request's) once, for "
        "correctness only: outputs and gradients against the reference, no timing reported; "
        "exit 1 naming each case that fails",
    )


def _run_once(args: argparse.Namespace, names: list[str], env: Mapping[str, str], cwd: Path,
              out: TextIO) -> int:  # fmt: skip
    """Each case of the profile measured with no warmup and one call (the correctness gate
    comes before any timing); only the cases' states are printed."""
    from ci_bench.commands.parser import build_parser
    from ci_bench.commands.shared import request_from
    from ci_bench.pipeline.kernels import head_kernels
    from ci_bench.pipeline.measuring import measure, saver, worker_runs
    from ci_bench.pipeline.session import open_bench

    argv = ["run", "--profile", args.run, "--warmup", "0", "--repeats", "1", "--quiet"]
    argv += ["--kernel", ",".join(names), "--no-compilation-cache"]
    argv += [f"--kernel-module={m}" for m in split_list(args.modules)]
    argv += [f"--config={args.config}"] if args.config is not None else []

    request = request_from(build_parser(argv).parse_args(argv), cwd)
    head = head_kernels(request, env, measuring=True)
    bench = open_bench(request, head.specs, env, device=head.device, process=head.process)
    with worker_runs(bench) as runs:
        results = measure(bench, runs, saver(None, replace=False))
    failed = [c for c in results.cases if c.status != "ok"]
    for case in failed:
        out.write(f"{case.id}: error: {case.error or 'error'}\n")
    total = len(results.cases)
    out.write(
        f"{total - len(failed)}/{total} cases of profile {args.run} correct (each run once; "
        "correctness only, no timing)\n"
    )
    return int(ExitCode.FAILED if failed else ExitCode.OK)


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    """Validate kernel SPECs without running them (every case traced, no array built);
    exit 2 with one line per broken rule."""
    from ci_bench.contract.check import spec_problems
    from ci_bench.contract.registry import load_kernels
    from ci_bench.contract.tunables import default_problems
    from ci_bench.measure.tracing import trace_problems
    from ci_bench.pipeline.config import load_config, resolve
    from ci_bench.pipeline.tuned import tuned_problems

    config = load_config(args.config, cwd)
    modules = split_list(args.modules) or config.kernels
    if not modules:
        raise InputError("check-spec wants a kernel module or file, or kernels in the config")
    bad, names = 0, []
    for module in dict.fromkeys(modules):
        for name, spec in load_kernels([module], root=config.root).items():
            names.append(name)
            problems = spec_problems(spec) or trace_problems(spec)
            problems += default_problems(spec)
            problems += tuned_problems(spec, resolve(config, config.baselines_dir))
            cases = sum(len(spec.cases(p)) for p in spec.matrix)
            if problems:
                bad += 1
                out.write(f"{module}: kernel {name} v{spec.version}: {len(problems)} problem(s)\n")
                out.writelines(f"  - {p}\n" for p in problems)
            else:
                profiles = ", ".join(spec.matrix)
                modes = "" if spec.modes == ("forward",) else f"; modes {', '.join(spec.modes)}"
                out.write(
                    f"{module}: kernel {name} v{spec.version} ok "
                    f"({profiles}; {cases} cases; compute unit {spec.compute_unit}{modes})\n"
                )
    if bad or args.run is None:
        return int(ExitCode.USAGE if bad else ExitCode.OK)
    return _run_once(args, names, env, cwd, out)
