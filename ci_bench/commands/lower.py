"""``ci-bench lower`` (Pallas lowered for a platform this machine lacks) and ``check-spec``."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from tabulate import tabulate

from ci_bench.commands.run import request_from
from ci_bench.errors import ExitCode, InputError
from ci_bench.outcome import ERRORS_FAIL, Outcome, exit_code
from ci_bench.pipeline.session import cases_for, load_specs
from ci_bench.schema.lowering import LoweredCase
from ci_bench.store.files import dump_model, write_text
from ci_bench.text import split_list


def cmd_lower(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    """Export every selected case for ``--platform``; exit 1 when any case fails to lower, or
    (TPU) when its cost model does not fit a target chip's VMEM."""
    from ci_bench.pipeline.lowering import lower_all

    request = request_from(args, cwd)
    specs = load_specs(request)
    results = lower_all(request, specs, cases_for(request.selection, specs), args.platform)
    if args.output is not None:
        write_text(args.output, dump_model(results), what="lowering", replace=args.force)
    done, chips = results.cases, results.meta.chips
    rows = [
        [c.id, c.status, c.kind or "–", ", ".join(c.custom_calls) or "–", _vmem(c), c.error or ""]
        for c in done
    ]
    headers = ("case", "status", "kind", "custom calls", "VMEM MiB", "error")
    out.write(tabulate(rows, headers=headers, disable_numparse=True))
    failed = sum(c.status != "ok" for c in done)
    fit = f" and fit VMEM on {', '.join(chips)}" if chips else ""
    out.write(
        f"\n\n{len(done) - failed}/{len(done)} cases lower for {results.meta.platform}{fit}\n"
    )
    outcome = Outcome(states={"error": failed}, policy=ERRORS_FAIL)
    return int(exit_code(outcome))


def _vmem(lowered: LoweredCase) -> str:
    model = lowered.model
    if model is None or model.vmem_bytes is None:
        return "–"
    return f"{model.vmem_bytes / 1024 / 1024:.2f}"


def cmd_check_spec(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
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
