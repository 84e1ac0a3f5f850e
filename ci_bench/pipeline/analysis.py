"""The cost model of a selection: every case's Pallas grid modelled per TPU chip, and
judged against the base's (the merge base for a pull request) when there is one.

Nothing is executed and no accelerator is needed: the check a pull request gets on any
runner, forks included. Method: docs/MODEL.md; output format: docs/FORMATS.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from ci_bench import __version__
from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.errors import ExitCode, InputError
from ci_bench.outcome import Outcome, exit_code
from ci_bench.pipeline.ab import base_checkout, resolve_base
from ci_bench.pipeline.request import Request
from ci_bench.pipeline.session import cases_for
from ci_bench.pipeline.sources import compare_sides
from ci_bench.schema.analysis import Analysis, AnalysisMeta, AnalyzedCase
from ci_bench.schema.model import CaseModel
from ci_bench.schema.report import RunState


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
        what = {"ok": "ok", "partial": model.reason}.get(
            model.status, f"not modelled: {model.reason}"
        )
        progress(f"[{index}/{len(cases)}] {case.id} {what}")
    return found


def _base_models(
    request: Request,
    heads: Mapping[str, KernelSpec],
    cases: Sequence[Case],
    chips: Sequence[str],
    progress: Callable[[str], None],
) -> tuple[str, dict[str, CaseModel], list[RunState]]:
    """The base's kernels (the merge base for a pull request), checked out in a temporary
    worktree and imported beside the head's (``contract.isolation``), modelled case by
    case: the same base the A/B measures against; ``same-code`` where both sides traced a
    kernel from one file."""

    name, sha = resolve_base(request.config.root, request.base)
    with base_checkout(request, name, sha) as checkout:
        sides = compare_sides(heads, checkout, cases, request.harness.seed, chips)
        same = sides.states
        for state in same:
            progress(f"same code on both sides: {state.reason}")
        for kernel, note in sides.notes.items():
            progress(f"{kernel}: {note}")
        models = _model_all(
            checkout.specs,
            cases,
            chips,
            request.harness.seed,
            request.harness.cost_model_factor,
            lambda line: progress(f"base {line}"),
        )
    return checkout.label, models, same


def analyze_cases(
    request: Request,
    specs: Mapping[str, KernelSpec],
    chips: Sequence[str],
    progress: Callable[[str], None],
) -> Analysis:
    """Every selected case modelled (and judged against the request's base when set)."""
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
    same: list[RunState] = []
    if request.base is not None:
        base_ref, bases, same = _base_models(request, specs, cases, chips, progress)
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
    verdict, code = _verdict(out, request, same)
    meta = AnalysisMeta(
        tool_version=__version__,
        jax=jax.__version__,
        profile=request.selection.profile,
        chips=list(chips),
        seed=seed,
        base_ref=base_ref,
        seconds=time.perf_counter() - start,
    )
    return Analysis(verdict=verdict, exit_code=int(code), meta=meta, cases=out, run_states=same)


def _verdict(
    cases: Sequence[AnalyzedCase], request: Request, same: Sequence[RunState] = ()
) -> tuple[str, ExitCode]:
    """The worst state present (error, structural, same code, then partial) and the exit
    code the one rule gives: 1 for a case that does not fit a target chip or changed
    structurally, or a comparison of a kernel with itself (as the policy says), 3 when no
    case could be modelled."""
    errors = sum(bool(c.errors) for c in cases)
    structural = sum(bool(c.against and c.against.verdict == "structural") for c in cases)
    modelled = sum(c.status == "ok" for c in cases)
    code = exit_code(
        Outcome(
            states={"error": errors, "structural": structural, "same-code": len(same)},
            policy=request.policy,
            measured=modelled,
        )
    )
    if not modelled:
        return "not_modelled", code
    if errors:
        return "error", code
    if structural:
        return "structural", code
    if same:
        return "same_code", code  # "no structural change" would be about nothing compared
    if any(c.status == "partial" for c in cases):
        return "partial", code  # some modelled time withheld: never a plain pass
    improved = any(c.against and c.against.verdict == "improved" for c in cases)
    return ("improved" if improved else "pass"), code
