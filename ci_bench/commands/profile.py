"""``ci-bench profile`` and ``ci-bench plot``: the specification's section 3, one command away."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.bench import load_specs
from ci_bench.commands.compare import load_results
from ci_bench.commands.run import request_from
from ci_bench.errors import InputError


def cmd_profile(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    """Trace one case under a top-level jit; with --dump-hlo also dump HLO and buffers."""
    from ci_bench.contract.registry import kernel_module
    from ci_bench.measure.hlo import dump_case_hlo
    from ci_bench.measure.profiling import trace_case

    request = request_from(args, cwd)
    config, specs = request.config, load_specs(request)
    kernels = list(request.selection.kernels)
    if len(kernels) != 1 or kernels[0] not in specs:
        known = ", ".join(specs)
        raise InputError(f"profile needs one --kernel (known: {known}), got {kernels or 'none'}")
    spec = specs[kernels[0]]
    if len(request.selection.case_globs) != 1:
        raise InputError(
            "profile needs exactly one --case ID, e.g. matmul/B1-M128-K128-N128/float32"
        )
    case_id = request.selection.case_globs[0]
    if args.runs < 1:
        raise InputError("--runs must be >= 1")
    out_dir: Path = args.out
    info = trace_case(spec, case_id, out_dir / "trace", runs=args.runs, seed=config.seed)
    out.write(info.describe() + "\n")
    if args.dump_hlo:
        module = kernel_module(request.modules, spec.name, config.root)
        dump = dump_case_hlo(module, case_id, out_dir / "hlo", root=config.root)
        out.write("\n" + dump.describe(args.top) + "\n")
    return 0


def cmd_plot(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    """Roofline PNG of a results file, with a baseline's points beside it when given."""
    from ci_bench.report.plot import png_bytes
    from ci_bench.store.files import write_bytes

    results = load_results(args.results)
    baseline = load_results(args.baseline) if args.baseline else None
    data = png_bytes(
        results, baseline=baseline, peak_tflops=args.peak_tflops, peak_gbps=args.peak_gbps
    )
    write_bytes(args.out, data, what="roofline chart", replace=args.force)
    out.write(f"roofline chart written to {args.out}\n")
    return 0
