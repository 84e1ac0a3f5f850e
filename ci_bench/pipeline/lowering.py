"""The lowering check of every pull request, forks included: each case's Pallas kernel
lowered for TPU on a GitHub-hosted CPU runner (no accelerator, no secrets, read-only
token), plus the smoke profile's correctness in interpret mode. Its files reach the one
sticky comment through a relay job that runs no pull-request code."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from ci_bench import __version__
from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.errors import CiBenchError, InputError
from ci_bench.github.context import PullRequest, WorkflowRun
from ci_bench.github.markers import legacy_marker, marker
from ci_bench.github.outputs import append_summary
from ci_bench.measure.kernel_process import KernelCodeError, KernelProcess
from ci_bench.outcome import ERRORS_FAIL, Outcome
from ci_bench.pipeline.analysis import analyze_cases
from ci_bench.pipeline.context import Context
from ci_bench.pipeline.current import against_now
from ci_bench.pipeline.kernels import HEAD, root_of
from ci_bench.pipeline.plan import MEASURE_LABEL
from ci_bench.pipeline.publish import api_client, comment_key, pull_number
from ci_bench.pipeline.request import Request
from ci_bench.pipeline.session import cases_for, utc_now
from ci_bench.pipeline.tune_hint import tiling_hints, worker_search
from ci_bench.report.sticky import (
    LOWERING_BUDGET,
    compose,
    lowering_section,
    sections_of,
    waiting,
)
from ci_bench.schema import RESULTS_READABLE, Results
from ci_bench.schema.analysis import ANALYSIS_READABLE, Analysis
from ci_bench.schema.gpus import GPU_NAMES
from ci_bench.schema.lowering import (
    LOWERING_READABLE,
    LoweredCase,
    LoweringMeta,
    LoweringResults,
)
from ci_bench.schema.model import CaseModel
from ci_bench.schema.platforms import LOWER_ROLE_TARGET, lower_role_platform
from ci_bench.schema.withheld import WithheldModel
from ci_bench.store.files import atomic_write_text, dump_model, read_model
from ci_bench.text import one_line


def lower_all(
    request: Request,
    specs: Mapping[str, KernelSpec],
    cases: Sequence[Case],
    platform: str,
    chips: Sequence[str] = (),
    *,
    process: KernelProcess | None = None,
) -> LoweringResults:
    """Export every case for ``platform`` as each of ``chips`` (TPU chips for tpu, GPUs for
    cuda; else config ``target-chips`` of that platform, else this machine's chip, else
    every one the tables know); a case that cannot lower is
    an error row (a ``host_error`` when the machine, not the kernel, is to blame), and (TPU)
    so is one whose cost model does not fit a target chip's VMEM: it would lower, then fail
    to compile in libtpu on that chip. With ``process`` (the lower role) each case is
    lowered and modelled in that worker, under the case time limit; else here (``ci-bench
    lower``, whose job is to run the kernels' code)."""
    import jax

    from ci_bench.measure.lowering import check_platform
    from ci_bench.measure.model.targets import resolve_targets

    checked = check_platform(platform)
    if not cases:
        raise InputError("the selection is empty: nothing to lower")
    chips = resolve_targets(chips, request.config.target_chips, checked)
    done = []
    for index, case in enumerate(cases, start=1):
        if process is None:
            lowered, model = _lower_here(specs[case.kernel], case, checked, chips, request)
        else:
            lowered, model = _lower_in(process, request, case, checked, chips)
        if model is not None:
            lowered = with_vmem_check(lowered, model, chips)
        done.append(lowered)
        if not request.outputs.quiet:
            status = {"error": "ERROR", "host_error": "HOST ERROR (not the kernel)"}
            what = (
                f"ok ({lowered.kind})"
                if lowered.status == "ok"
                else f"{status[lowered.status]} {lowered.error}"
            )
            sys.stderr.write(f"[{index}/{len(cases)}] {case.id} {what}\n")
        if lowered.traceback:
            sys.stderr.write(lowered.traceback + "\n")
    return LoweringResults(
        meta=LoweringMeta(
            tool_version=__version__,
            started_at=utc_now(),
            platform=checked,
            profile=request.selection.profile,
            jax=jax.__version__,
            jaxlib=metadata.version("jaxlib"),
            kernels={c.kernel: specs[c.kernel].version for c in cases},
            chips=chips,
        ),
        cases=done,
    )


def _lower_here(
    spec: KernelSpec, case: Case, platform: str, chips: Sequence[str], request: Request
) -> tuple[LoweredCase, CaseModel | None]:
    from ci_bench.measure.lowering import lower_for_chips
    from ci_bench.measure.model import analyze_case

    seed, factor = request.harness.seed, request.harness.cost_model_factor
    lowered = lower_for_chips(spec, case, platform, chips, seed)  # type: ignore[arg-type]
    if platform != "tpu":
        return lowered, None
    return lowered, analyze_case(spec, case, chips, seed=seed, flops_factor=factor)


def _lower_in(
    process: KernelProcess, request: Request, case: Case, platform: str, chips: Sequence[str]
) -> tuple[LoweredCase, CaseModel | None]:
    """The case lowered (and, for TPU, modelled) in the head's worker."""
    seed, factor = request.harness.seed, request.harness.cost_model_factor
    modules, root = root_of(request)
    try:
        lowered, model = process.call(
            "ci_bench.measure.kernel_side:lower_case",
            modules,
            root,
            platform,
            tuple(chips),
            seed,
            factor,
            case,
            what=f"kernel {case.kernel}",
            doing="lowered",
        )
    except KernelCodeError as exc:
        raise exc.on(HEAD) from None
    return (
        LoweredCase.model_validate(lowered),
        None if model is None else CaseModel.model_validate(model),
    )


def with_vmem_check(lowered: LoweredCase, model: CaseModel, chips: Sequence[str]) -> LoweredCase:
    """The lowered case with its cost model; an error if its VMEM does not fit a target
    chip (and it lowered: a lowering failure stays the first error)."""
    from ci_bench.judge.model import vmem_reason

    # Validated as the file holds it: a partial case's times withheld (issue 39).
    update: dict[str, Any] = {"model": WithheldModel.model_validate(model.model_dump())}
    too_big = vmem_reason(model, chips)
    if too_big and lowered.status == "ok":
        update |= {"status": "error", "error": too_big}
    return lowered.model_copy(update=update)


def lower_step(ctx: Context) -> None:
    """LOWER, every pull request (a ``pull_request`` workflow, read-only token): lower each
    case for TPU (with the VMEM check) and judge the cost model against the merge base
    (exact feedback even when nothing is timed); the plan's MEASURE then checks the smoke
    profile's correctness in the CPU interpreter, saved beside it. The files
    (lowering.json, analysis.json, smoke.json, pr.json) go into the artifact the relay job
    reads."""
    request, actions = ctx.request, ctx.actions
    head = ctx.kernels()  # described, lowered and modelled in a worker, never here
    specs = head.specs
    cases = cases_for(request.selection, specs)
    # The platform table's target (TPU), or CUDA when the config targets GPUs only.
    platform = lower_role_platform(request.config.target_chips, GPU_NAMES)
    lowered = lower_all(request, specs, cases, platform, process=head.process)
    hints = (
        tiling_hints(
            request,
            cases,
            lowered.meta.chips,
            _progress(request),
            worker_search(head.process, request, lowered.meta.chips),
        )
        if platform == LOWER_ROLE_TARGET
        else []  # the tiling search ranks TPU tilings
    )
    lowered = lowered.model_copy(update={"tiling": hints})
    out_dir = request.outputs.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / "lowering.json", dump_model(lowered))
    structural = same = 0
    if request.base is not None:
        analysis = analyze_cases(request, head, lowered.meta.chips, _progress(request))
        atomic_write_text(out_dir / "analysis.json", dump_model(analysis))
        structural = sum(
            bool(c.against and c.against.verdict == "structural") for c in analysis.cases
        )
        same = sum(r.state == "same-code" for r in analysis.run_states)
    event = actions.event
    if isinstance(event, PullRequest):
        pr = {"number": event.number, "head_sha": event.head_sha, "run_url": actions.run_url}
        atomic_write_text(out_dir / "pr.json", json.dumps(pr) + "\n")
    ctx.save_to = out_dir / "smoke.json"
    ctx.after.append(lambda ctx: _lowered_and_smoke(ctx, lowered, structural, same))


def _lowered_and_smoke(
    ctx: Context, lowered: LoweringResults, structural: int, same: int = 0
) -> None:
    """The lower job's line and outcome: lowering errors and wrong smoke cases fail; a
    structural change and a comparison of a kernel with itself as the policy says."""
    smoke = ctx.results
    assert smoke is not None
    bad = sum(c.status == "error" for c in lowered.cases)
    host = sum(c.status == "host_error" for c in lowered.cases)
    wrong = sum(c.status != "ok" for c in smoke.cases)
    hosted = f" ({host} could not be lowered on this machine: host_error)" if host else ""
    ctx.out.write(
        f"ci-bench: {len(lowered.cases) - bad - host}/{len(lowered.cases)} cases lower for "
        f"{lowered.meta.platform.upper()}{hosted}; "
        f"{len(smoke.cases) - wrong}/{len(smoke.cases)} smoke cases correct\n"
    )
    ctx.outcome = Outcome(
        states={"error": bad + wrong, "structural": structural, "same-code": same},
        policy=_LoweringPolicy(ctx.request),
    )
    _whole_section(ctx)


def _whole_section(ctx: Context) -> None:
    """Every row of the lowering section (the comment shows it within its budget): in the
    artifact as ``lowering.md`` and, unless --no-publish, in the job summary."""
    request, actions = ctx.request, ctx.actions
    out_dir = request.outputs.out_dir
    text = lowering_section_of(
        out_dir, ctx.head, actions.run_url, request.config.tune_hint, budget=None
    )
    atomic_write_text(out_dir / "lowering.md", text + "\n")
    if request.publishing.publish and actions.step_summary:
        try:
            append_summary(actions.step_summary, text + "\n")
        except (OSError, CiBenchError) as exc:  # the artifact still has it
            sys.stderr.write(f"ci-bench: GITHUB_STEP_SUMMARY: {one_line(str(exc))}\n")


class _LoweringPolicy:
    """A case that does not lower or is wrong always fails; a structural change of the
    cost model fails as the request's policy says (``fail-on.structural``)."""

    def __init__(self, request: Request) -> None:
        self.request = request

    def fails(self, state: str) -> bool:
        return ERRORS_FAIL.fails(state) or self.request.policy.fails(state)


def _progress(request: Request) -> Callable[[str], None]:
    def progress(line: str) -> None:
        if not request.outputs.quiet:
            sys.stderr.write(line + "\n")

    return progress


def lowering_section_of(
    folder: Path,
    head_sha: str | None,
    run_url: str | None,
    tune_hint: float = 0.0,
    *,
    budget: int | None = LOWERING_BUDGET,
) -> str:
    """The comment's lowering section from a lowering job's files (``lowering.json``, and
    ``smoke.json`` and ``analysis.json`` where the job wrote them), read as data, exactly as
    the relay posts it: the pull request code's claim, its tiling hints above ``tune-hint``
    (this side's config) as lines, within its budget (None: whole, for the job summary)."""
    lowering = read_model(
        folder / "lowering.json", LoweringResults, what="lowering", schema_version=LOWERING_READABLE
    )
    smoke_path, analysis_path = folder / "smoke.json", folder / "analysis.json"
    smoke = (
        read_model(smoke_path, Results, what="results", schema_version=RESULTS_READABLE)
        if smoke_path.is_file()
        else None
    )
    analysis = (
        read_model(analysis_path, Analysis, what="analysis", schema_version=ANALYSIS_READABLE)
        if analysis_path.is_file()
        else None
    )
    return lowering_section(
        lowering,
        smoke,
        head_sha,
        run_url,
        analysis=analysis,
        tune_hint=tune_hint,
        claim=True,
        budget=budget,
    )


def relay_step(ctx: Context) -> None:
    """A ``workflow_run`` job (default-branch code, no pull-request code): the lowering
    run's artifact becomes the comment's lowering section, and nothing else.

    That artifact is whatever the pull request's code (and, in a fork, its own copy of the
    workflow file) left in ``lowering/``: only ``lowering.json`` (with ``analysis.json`` and
    ``smoke.json``), schema-validated and escaped, is read, and written as that code's
    claim. A ``report.json`` or anything else there is ignored: the verdict section comes
    only from the benchmark workflow's own jobs. Like every writer of the comment, it
    writes only while the run's head is the pull request's head now.
    """
    request, actions, out = ctx.request, ctx.actions, ctx.out
    event = actions.event
    if not isinstance(event, WorkflowRun):
        raise InputError("the relay role needs a workflow_run event")
    if event.event not in ("pull_request", "pull_request_target"):
        out.write(f"ci-bench: the run was a {event.event} event: no pull request to comment on\n")
        return
    folder = request.inputs.report_dir or request.outputs.out_dir
    run_url = f"{actions.server_url}/{actions.repository}/actions/runs/{event.run_id}"
    client = api_client(actions, request.config)
    number = pull_number(folder, event, client)  # an untrusted number is checked first
    if not (folder / "lowering.json").is_file():
        raise InputError(
            f"{folder}: no lowering.json in the artifact: the relay writes only the lowering "
            "section (a verdict comes from the benchmark workflow's own jobs); not commenting"
        )
    section = lowering_section_of(folder, event.head_sha, run_url, request.config.tune_hint)
    now = against_now(
        event.head_sha,
        client.pull_head_sha(number),
        fork=event.from_fork,
        measured=False,
        label=MEASURE_LABEL,
    )
    if not now.current:
        out.write(f"ci-bench: {now.line}; the lowering section is left as it is\n")
        return
    key = comment_key(request.config)

    def body(old: str | None) -> str:
        wanted = {"lowering": section}
        if "verdict" not in sections_of(old):
            wanted["verdict"] = waiting(event.head_sha, event.from_fork, MEASURE_LABEL)
        return compose(old, wanted)

    action, url = client.upsert_comment(
        number, marker(key, number), body, legacy=legacy_marker(key)
    )
    out.write(f"ci-bench: comment {action}: {url}\n")
