"""The cost model of a selection: every case's Pallas grid modelled per TPU chip, and
judged against the base's (the merge base for a pull request) when there is one.

Nothing is executed and no accelerator is needed: the check a pull request gets on any
runner, forks included. Method: docs/MODEL.md; output format: docs/FORMATS.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ci_bench import __version__
from ci_bench.contract.spec import Case
from ci_bench.errors import ExitCode, InputError
from ci_bench.measure.kernel_process import KernelCodeError, KernelProcess
from ci_bench.outcome import Outcome, exit_code
from ci_bench.pipeline.ab import base_checkout, resolve_base
from ci_bench.pipeline.kernels import HEAD, HeadKernels, base_side, root_of
from ci_bench.pipeline.request import Request
from ci_bench.pipeline.session import cases_for
from ci_bench.pipeline.sources import compare_sides
from ci_bench.schema.analysis import Analysis, AnalysisMeta, AnalyzedCase
from ci_bench.schema.model import CaseModel
from ci_bench.schema.report import RunState


def model_cases(
    process: KernelProcess,
    cases: Sequence[Case],
    model: Callable[[Case], tuple[Any, ...]],
    side: str,
    progress: Callable[[str], None],
    *,
    tolerant: bool,
) -> tuple[dict[str, CaseModel], dict[str, str]]:
    """Each case modelled in ``process`` (a worker, under the case time limit): the models
    and, when ``tolerant`` (the base), per kernel, why its code hung, crashed or failed
    there (its other cases skipped); else that failure is raised, said to be ``side``'s.
    ``model(case)``: the worker's function and its arguments before the case."""
    found: dict[str, CaseModel] = {}
    failed: dict[str, str] = {}
    for index, case in enumerate(cases, start=1):
        if case.kernel in failed:
            continue
        function, *args = model(case)
        try:
            answer = process.call(
                function, *args, case, what=f"kernel {case.kernel}", doing="modelled"
            )
        except KernelCodeError as exc:
            if not tolerant:
                raise exc.on(side) from None
            failed[case.kernel] = str(exc.on(side))
            continue
        found[case.id] = result = CaseModel.model_validate(answer)
        what = {"ok": "ok", "partial": result.reason}.get(
            result.status, f"not modelled: {result.reason}"
        )
        progress(f"[{index}/{len(cases)}] {case.id} {what}")
    return found, failed


_SIDE = "ci_bench.measure.kernel_side"
ALONE = "; head measured alone"  # the A/B's words; an analysis measures nothing


def _base_models(
    request: Request,
    head: HeadKernels,
    cases: Sequence[Case],
    chips: Sequence[str],
    progress: Callable[[str], None],
) -> tuple[str, dict[str, CaseModel], list[RunState], dict[str, str]]:
    """The base's kernels (the merge base for a pull request), checked out in a temporary
    worktree and imported in the worker beside the head's (``contract.isolation``), modelled
    case by case: the same base the A/B measures against; ``same-code`` where both sides
    traced a kernel from one file. A base whose code hangs, crashes or fails is not
    compared, and said to be the base's (the last value: kernel -> why)."""

    name, sha = resolve_base(request.config.root, request.base)
    process = head.process
    with base_checkout(request, name, sha, process, head) as checkout:
        seed, factor = request.harness.seed, request.harness.cost_model_factor
        sides = compare_sides(process, request, checkout, cases, seed, chips)
        failed = {**checkout.failed, **sides.failed}
        for state in sides.states:
            progress(f"same code on both sides: {state.reason}")
        for kernel, note in sides.notes.items():
            progress(f"{kernel}: {note}")
        wanted = [c for c in cases if c.kernel in checkout.specs and c.kernel not in failed]
        models, broken = model_cases(
            process,
            wanted,
            lambda _: (f"{_SIDE}:model_base", checkout.where, tuple(chips), seed, factor),
            base_side(name),
            lambda line: progress(f"base {line}"),
            tolerant=True,
        )
    failed = {k: why.removesuffix(ALONE) for k, why in {**failed, **broken}.items()}
    for why in dict.fromkeys(failed.values()):
        progress(f"{why}: not compared")
    return checkout.label, models, sides.states, failed


def analyze_cases(
    request: Request,
    head: HeadKernels,
    chips: Sequence[str],
    progress: Callable[[str], None],
) -> Analysis:
    """Every selected case modelled in the head's worker (and judged against the request's
    base when set, modelled in the same worker); nothing of a kernel runs here."""
    import jax

    from ci_bench.judge.model import judge_model, vmem_errors

    start = time.perf_counter()
    specs = head.specs
    cases = cases_for(request.selection, specs)
    if not cases:
        raise InputError("the selection is empty: nothing to analyze")
    seed, factor = request.harness.seed, request.harness.cost_model_factor
    modules, root = root_of(request)
    heads, _ = model_cases(  # the head's failure is the pull request's error: raised
        head.process,
        cases,
        lambda _: (f"{_SIDE}:model_head", modules, root, tuple(chips), seed, factor),
        HEAD,
        progress,
        tolerant=False,
    )
    base_ref: str | None = None
    bases: dict[str, CaseModel] = {}
    same: list[RunState] = []
    failures: dict[str, str] = {}
    if request.base is not None:
        base_ref, bases, same, failures = _base_models(request, head, cases, chips, progress)
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
        base_failures=failures,
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
