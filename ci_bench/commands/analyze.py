"""``ci-bench analyze``: the cost model read from each case's Pallas grid, per TPU chip.

No accelerator, nothing executed: each case's Pallas implementation is traced with
``jax.make_jaxpr`` and its ``pallas_call``s modelled (HBM bytes, re-read factors, grid
steps, VMEM against each chip's limit, modelled time). ``--base REF`` also models the base
ref's kernels and judges every case against them, exactly: the check a pull request gets
on any runner, forks included. Method: docs/MODEL.md; output format: docs/FORMATS.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from tabulate import tabulate

from ci_bench import __version__
from ci_bench.commands.bench import cases_for, load_specs
from ci_bench.commands.request import Request
from ci_bench.commands.run import request_from
from ci_bench.commands.validate import check_output_file
from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.errors import ExitCode, InputError
from ci_bench.schema.analysis import Analysis, AnalysisMeta, AnalyzedCase
from ci_bench.schema.model import CaseModel
from ci_bench.store.files import atomic_write_text, dump_model

MIB = 1024 * 1024


def register(sub: argparse._SubParsersAction, add_selection: Callable) -> None:  # type: ignore[type-arg]
    """Add ``analyze`` (with the usual selection flags) to ``ci-bench``."""
    analyze = sub.add_parser(
        "analyze",
        help="the cost model read from the Pallas grid: HBM bytes, grid steps, VMEM and "
        "modelled time per TPU chip (no accelerator; nothing is executed)",
    )
    add_selection(analyze)
    analyze.add_argument(
        "--chip",
        action="append",
        default=[],
        metavar="NAME",
        help="target TPU chip, jax's names: v4, v5e, v5p, v6e, 7x (repeatable; default: "
        "config target-chips, else this machine's TPU, else all of them)",
    )
    analyze.add_argument("--format", choices=("table", "json"), default="table")
    analyze.add_argument("--output", "-o", type=Path, help="write the analysis JSON here")
    analyze.add_argument(
        "--base",
        metavar="REF",
        help="also model the kernels at this git ref and judge each case against them",
    )
    analyze.add_argument("--fail-on", metavar="STATES", help="as for compare (default: config)")
    analyze.add_argument("--shape", help="ad-hoc case, e.g. 1024,1024,1024 (with --dtype)")
    analyze.add_argument("--dtype", default="bfloat16", help="dtype of the --shape case")
    analyze.add_argument("--seed", type=int, help="PRNG seed for inputs (default 42)")
    analyze.add_argument("--quiet", "-q", action="store_true", help="no progress lines")


def resolve_chips(given: Sequence[str], configured: Sequence[str]) -> list[str]:
    """--chip, else config target-chips, else this machine's TPU, else every chip."""
    from ci_bench.measure.model.chips import CHIP_NAMES

    unknown = [c for c in given if c not in CHIP_NAMES]
    if unknown:
        raise InputError(
            f"--chip: unknown TPU chip(s) {', '.join(unknown)}; known: {', '.join(CHIP_NAMES)}"
        )
    if given or configured:
        return list(dict.fromkeys([*given] or [*configured]))
    import jax

    from ci_bench.measure.model.chips import chip_for_device_kind

    if jax.default_backend() == "tpu":
        here = chip_for_device_kind(jax.devices()[0].device_kind)
        if here:
            return [here]
    return list(CHIP_NAMES)


def _model_all(
    specs: Mapping[str, KernelSpec],
    cases: Sequence[Case],
    chips: Sequence[str],
    seed: int,
    factor: float,
    progress: Callable[[str], None],
) -> dict[str, CaseModel]:
    from ci_bench.measure.model import analyze_case

    found = {}
    for index, case in enumerate(cases, start=1):
        spec = specs.get(case.kernel)
        if spec is None:
            continue
        model = analyze_case(spec, case, chips, seed=seed, flops_factor=factor)
        found[case.id] = model
        what = "ok" if model.status == "ok" else f"not modelled: {model.reason}"
        progress(f"[{index}/{len(cases)}] {case.id} {what}")
    return found


def _base_models(
    request: Request,
    cases: Sequence[Case],
    chips: Sequence[str],
    progress: Callable[[str], None],
) -> tuple[str, dict[str, CaseModel]]:
    """The base ref's kernels, checked out in a temporary worktree, modelled case by case."""
    from ci_bench.commands.ab import load_isolated, worktree
    from ci_bench.commands.config import load_config

    ref = request.base_ref
    assert ref is not None
    with worktree(request.config.root, ref) as (folder, sha):
        pyproject = folder / "pyproject.toml"
        modules = list(load_config(pyproject, folder).kernels) if pyproject.is_file() else []
        extra = [m for m in request.modules if m not in request.config.kernels]
        base = load_isolated(folder, list(dict.fromkeys([*modules, *extra])))
        models = _model_all(
            base,
            cases,
            chips,
            request.harness.seed,
            request.harness.cost_model_factor,
            lambda line: progress(f"base {line}"),
        )
    return f"{ref} ({sha[:12]})", models


def analyze_cases(
    request: Request,
    specs: Mapping[str, KernelSpec],
    chips: Sequence[str],
    progress: Callable[[str], None],
) -> Analysis:
    """Every selected case modelled (and judged against ``request.base_ref`` when set)."""
    import jax

    from ci_bench.judge.model import judge_model, vmem_errors

    start = time.perf_counter()
    cases = cases_for(request.selection, specs)
    if not cases:
        raise InputError("the selection is empty: nothing to analyze")
    seed, factor = request.harness.seed, request.harness.cost_model_factor
    heads = _model_all(specs, cases, chips, seed, factor, progress)
    base_ref: str | None = None
    bases: dict[str, CaseModel] = {}
    if request.base_ref:
        base_ref, bases = _base_models(request, cases, chips, progress)
    out = []
    for case in cases:
        model = heads[case.id]
        against = judge_model(model, bases.get(case.id), chips, request.thresholds)
        out.append(
            AnalyzedCase(
                **model.model_dump(),
                id=case.id,
                kernel=case.kernel,
                version=specs[case.kernel].version,
                errors=vmem_errors(model, chips),
                against=against,
            )
        )
    verdict, code = _verdict(out, request)
    meta = AnalysisMeta(
        tool_version=__version__,
        jax=jax.__version__,
        profile=request.selection.profile,
        chips=list(chips),
        seed=seed,
        base_ref=base_ref,
        seconds=time.perf_counter() - start,
    )
    return Analysis(verdict=verdict, exit_code=int(code), meta=meta, cases=out)


def _verdict(cases: Sequence[AnalyzedCase], request: Request) -> tuple[str, ExitCode]:
    """The worst state present (error, then structural) and the exit code the policy gives:
    1 for a case that does not fit a target chip or changed structurally, 3 when no case
    could be modelled."""
    if not any(c.status == "ok" for c in cases):
        return "not_modelled", ExitCode.NOTHING_MEASURED
    errors = any(c.errors for c in cases)
    structural = any(c.against and c.against.verdict == "structural" for c in cases)
    failing = (errors and request.policy.fails("error")) or (
        structural and request.policy.fails("structural")
    )
    code = ExitCode.FAILED if failing else ExitCode.OK
    if errors:
        return "error", code
    if structural:
        return "structural", code
    improved = any(c.against and c.against.verdict == "improved" for c in cases)
    return ("improved" if improved else "pass"), code


def _mib(n: int | None) -> str:
    return "–" if n is None else f"{n / MIB:.2f}"


def analysis_table(analysis: Analysis) -> str:
    """One row per case: traffic, re-read operand, steps, VMEM, modelled µs per chip."""
    chips = analysis.meta.chips
    headers = ["case", "HBM MiB", "ideal", "re-read", "steps", "VMEM MiB"]
    headers += [f"{c} µs" for c in chips]
    if analysis.meta.base_ref:
        headers.append("vs base")
    rows = []
    for case in analysis.cases:
        if case.status != "ok":
            rows.append([case.id, f"not modelled: {case.reason}"[:80]])
            continue
        reread = next((c.reread_operand for c in case.calls if c.reread_operand), None)
        row = [
            case.id,
            _mib(case.hbm_bytes),
            _mib(case.ideal_bytes),
            reread or "–",
            case.grid_steps,
            _mib(case.vmem_bytes),
        ]
        for name in chips:
            found = case.chips.get(name)
            cell = "–" if found is None else f"{found.modelled_us:,.1f}"
            row.append(cell if found is None or found.fits else f"{cell} ✗ VMEM")
        if analysis.meta.base_ref:
            row.append(f"{case.against.verdict}: {case.against.reason}" if case.against else "new")
        rows.append(row)
    lines = [tabulate(rows, headers=headers, disable_numparse=True)]
    wrong = [c for c in analysis.cases if c.flops_check == "mismatch"]
    if wrong:
        lines.append(
            "\nMXU FLOPs read from the kernel differ from the SPEC's model beyond the factor:"
        )
        lines += [f"  {c.id}: {c.flops_ratio:.2f}x the SPEC's {c.spec_flops:,}" for c in wrong]
    errors = [e for c in analysis.cases for e in (f"{c.id}: {x}" for x in c.errors)]
    if errors:
        lines.append("\nDoes not fit VMEM (an error on that chip):")
        lines += [f"  {e}" for e in errors]
    seconds = analysis.meta.seconds or 0.0
    lines.append(f"\n{analysis.verdict}: {len(analysis.cases)} cases in {seconds:.1f} s")
    return "\n".join(lines) + "\n"


def cmd_analyze(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    if args.output is not None:
        check_output_file(args.output, "--output")  # before anything is traced
    request = request_from(args, cwd)
    chips = resolve_chips(args.chip, request.config.target_chips)
    specs = load_specs(request)

    def progress(line: str) -> None:
        if not args.quiet:
            sys.stderr.write(line + "\n")

    analysis = analyze_cases(request, specs, chips, progress)
    if args.output is not None:
        atomic_write_text(args.output, dump_model(analysis))
    out.write(dump_model(analysis) if args.format == "json" else analysis_table(analysis))
    return analysis.exit_code


COMMANDS = {"analyze": cmd_analyze}
