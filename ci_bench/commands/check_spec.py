"""``ci-bench check-spec``: kernel SPECs validated without running them."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.common_args import add_config
from ci_bench.errors import ExitCode, InputError
from ci_bench.text import split_list

NAME = "check-spec"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        NAME, help="validate kernel SPECs without running them (default: the config's)"
    )
    parser.add_argument(
        "modules", nargs="*", metavar="MODULE", help="module name or .py file exposing SPEC"
    )
    add_config(parser)


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
    bad = 0
    for module in dict.fromkeys(modules):
        for name, spec in load_kernels([module], root=config.root).items():
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
    return int(ExitCode.USAGE if bad else ExitCode.OK)
