"""``ci-bench lower`` (Pallas lowered for a platform this machine lacks) and ``check-spec``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from tabulate import tabulate

from ci_bench import __version__
from ci_bench.commands.bench import cases_for, load_specs, utc_now
from ci_bench.commands.run import request_from
from ci_bench.errors import ExitCode, InputError
from ci_bench.store.files import dump_model, write_text
from ci_bench.text import split_list


def cmd_lower(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    """Export every selected case for ``--platform``; exit 1 when any case fails to lower."""
    from importlib import metadata

    import jax

    from ci_bench.measure.lowering import check_platform, lower_case
    from ci_bench.schema.lowering import LoweringMeta, LoweringResults

    platform = check_platform(args.platform)
    request = request_from(args, cwd)
    specs = load_specs(request)
    cases = cases_for(request.selection, specs)
    if not cases:
        raise InputError("the selection is empty: nothing to lower")
    seed = request.harness.seed
    done = []
    for index, case in enumerate(cases, start=1):
        lowered = lower_case(specs[case.kernel], case, platform, seed)
        done.append(lowered)
        if not args.quiet:
            what = f"ok ({lowered.kind})" if lowered.status == "ok" else f"ERROR {lowered.error}"
            sys.stderr.write(f"[{index}/{len(cases)}] {case.id} {what}\n")
        if lowered.traceback:
            sys.stderr.write(lowered.traceback + "\n")
    results = LoweringResults(
        meta=LoweringMeta(
            tool_version=__version__,
            started_at=utc_now(),
            platform=platform,
            profile=request.selection.profile,
            jax=jax.__version__,
            jaxlib=metadata.version("jaxlib"),
            kernels={c.kernel: specs[c.kernel].version for c in cases},
        ),
        cases=done,
    )
    if args.output is not None:
        write_text(args.output, dump_model(results), what="lowering", replace=args.force)
    rows = [
        [c.id, c.status, c.kind or "–", ", ".join(c.custom_calls) or "–", c.error or ""]
        for c in done
    ]
    out.write(tabulate(rows, headers=("case", "status", "kind", "custom calls", "error")))
    failed = sum(c.status != "ok" for c in done)
    out.write(f"\n\n{len(done) - failed}/{len(done)} cases lower for {platform}\n")
    return int(ExitCode.FAILED if failed else ExitCode.OK)


def cmd_check_spec(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    """Validate kernel SPECs without running them; exit 2 with one line per broken rule."""
    from ci_bench.commands.config import load_config
    from ci_bench.contract.check import spec_problems
    from ci_bench.contract.registry import load_kernels

    config = load_config(args.config, cwd)
    modules = split_list(args.modules) or config.kernels
    if not modules:
        raise InputError("check-spec wants a kernel module or file, or kernels in the config")
    bad = 0
    for module in dict.fromkeys(modules):
        for name, spec in load_kernels([module], root=config.root).items():
            problems = spec_problems(spec)
            cases = sum(len(spec.cases(p)) for p in spec.matrix)
            if problems:
                bad += 1
                out.write(f"{module}: kernel {name} v{spec.version}: {len(problems)} problem(s)\n")
                out.writelines(f"  - {p}\n" for p in problems)
            else:
                profiles = ", ".join(spec.matrix)
                out.write(
                    f"{module}: kernel {name} v{spec.version} ok "
                    f"({profiles}; {cases} cases; compute unit {spec.compute_unit})\n"
                )
    return int(ExitCode.USAGE if bad else ExitCode.OK)
