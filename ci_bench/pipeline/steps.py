"""The steps (``plan.Step``) as code: one function per step, each taking the role's
``Context``, and the table the runner dispatches on.

A role is its plan's steps plus where it keeps its files (``SETUPS``: the shard's state
file, the single job's handed-in results). Before any step runs, each step's check
(``CHECKS``) runs, so a bad A/B base, release tag, record event or a missing token fails
before anything is measured. CONFIRM is done by MEASURE, in the same workers (the re-measure
needs the warm session); GATE runs before any request exists (``run.run_ci``).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from ci_bench.errors import CiBenchError, InputError
from ci_bench.github.context import ActionsContext, PullRequest
from ci_bench.github.outputs import write_outputs
from ci_bench.judge.compare import outcome_of
from ci_bench.measure.roofline import table_peaks
from ci_bench.outcome import Outcome
from ci_bench.pipeline import publish as pub
from ci_bench.pipeline.ab import resolve_base, run_ab
from ci_bench.pipeline.context import Context, measure_and_confirm
from ci_bench.pipeline.judging import baseline_report, final_report, load_report, load_results
from ci_bench.pipeline.lowering import lower_step, relay_step
from ci_bench.pipeline.plan import Gate, Role, Step
from ci_bench.pipeline.release import promote_check, promote_step, record_check, record_step
from ci_bench.pipeline.request import Request
from ci_bench.pipeline.session import matrix_of
from ci_bench.report.plot import roofline_png
from ci_bench.schema import Results
from ci_bench.store.files import atomic_write_text, dump_model
from ci_bench.store.merge import merge_results
from ci_bench.text import one_line

StepFn = Callable[[Context], None]


def gate_step(gate_: Gate, actions: ActionsContext, out: TextIO) -> Outcome:
    """GATE, the plan job: the decision as step outputs, and one line saying it."""
    if actions.output:
        write_outputs(actions.output, gate_.outputs())
    what = [name for name in ("measure", "ab") if getattr(gate_, name)] or ["nothing"]
    out.write(f"ci-bench plan: {', '.join(what)} ({gate_.reason})\n")
    return Outcome()


def measure_step(ctx: Context) -> None:
    """MEASURE (and CONFIRM, when planned): the selection into results, saved per case.
    Handed-in results stand in for it (JUDGE reads them)."""
    if ctx.given_results is not None:
        return
    if ctx.save_to is not None:
        ctx.save_to.parent.mkdir(parents=True, exist_ok=True)
    ctx.results = measure_and_confirm(
        ctx.request,
        ctx.env,
        ctx.ports,
        ctx.save_to,
        confirm=ctx.plan.has(Step.CONFIRM),
        resume=ctx.resume,
        specs=ctx.given_specs,
        cases=ctx.cases,
        head=ctx.kernels() if ctx.given_specs is None else None,
    )


def ab_check(ctx: Context) -> None:
    """The A/B base, resolved before anything is measured."""
    ctx.base = resolve_base(ctx.request.config.root, ctx.request.base)


def ab_step(ctx: Context) -> None:
    """AB: head against the base in workers (unless another job's A/B report is given)."""
    if ctx.given_ab is None:
        ctx.ab = run_ab(
            ctx.request, ctx.kernels(), ctx.env, base=ctx.base, open_runs=ctx.ports.open_runs
        )


def merge_step(ctx: Context) -> None:
    """MERGE: the shards' results joined (a lost shard's cases are unmeasured), saved, and
    charted; judged against the matrix the SPECs say the run had to measure."""
    request = ctx.request
    files = _shard_files(request.inputs.results)
    if not (ctx.plan.gate.measure or files):
        return
    if not files:
        raise InputError(
            f"{request.inputs.results}: no shard results (every shard failed or was lost)"
        )
    merged = merge_results([(str(p), load_results(p)) for p in files])
    atomic_write_text(request.outputs.out_dir / "results.json", dump_model(merged))
    _roofline(merged, request.outputs.out_dir / "roofline.png")
    ctx.results = merged
    ctx.require_confirmation = request.confirm
    ctx.expected = _expected(ctx)


def judge_step(ctx: Context) -> None:
    """JUDGE: the results against the baselines and the A/B, into one verdict (an A/B
    that was planned and never reported is ``ab-missing``)."""
    request = ctx.request
    if ctx.results is None and ctx.given_results is not None:
        ctx.results = load_results(ctx.given_results)
    baseline = None
    if ctx.results is not None:
        baseline = baseline_report(
            request,
            ctx.results,
            require_confirmation=ctx.require_confirmation,
            expected=ctx.expected,
        )
    if ctx.ab is None and ctx.given_ab is not None:
        ctx.ab = load_report(ctx.given_ab)
    missing = ctx.plan.expect_ab and ctx.ab is None
    ctx.report = final_report(
        baseline,
        ctx.ab,
        request,
        expect_ab=ctx.plan.expect_ab,
        ab_missing_why=_ab_missing_why(request, ctx.env) if missing else "",
        acceptance=ctx.plan.gate.acceptance,
    )


def publish_step(ctx: Context) -> None:
    """PUBLISH: the report files (and pr.json), then, unless --no-publish, the job
    summary, step outputs and annotations; the headline and the exit code's outcome."""
    request, actions = ctx.request, ctx.actions
    assert ctx.report is not None
    report = ctx.report.model_copy(update={"head_sha": ctx.head, "run_url": actions.run_url})
    ctx.report = report
    out_dir = request.outputs.out_dir
    path = pub.write_report_files(report, out_dir, "report")
    if isinstance(actions.event, PullRequest):
        pr = {
            "number": actions.event.number,
            "head_sha": actions.event.head_sha,
            "run_url": actions.run_url,
        }
        atomic_write_text(out_dir / "pr.json", json.dumps(pr) + "\n")
    if request.publishing.publish:
        pub.publish_locally(report, path, actions, ctx.out)
    ctx.out.write(report.headline + "\n")
    ctx.outcome = outcome_of(report.cases, report.policy, report.run_states)


def comment_step(ctx: Context) -> None:
    """COMMENT: the one sticky comment, from this job's report (the single job) or the
    report job's artifact (the comment job). A GitHub failure is said and kept in the
    outcome (exit 4 after the rest)."""
    request = ctx.request
    folder = request.outputs.out_dir
    if ctx.report is None:
        folder = request.inputs.report_dir or folder
    elif _left_to_comment_job(ctx):
        return
    try:
        posted = pub.comment_role(
            ctx.plan.gate, ctx.actions, request.config, folder, ctx.env, ctx.out
        )
    except CiBenchError as exc:
        if exc.exit_code != 4:
            raise
        said = one_line(str(exc)) if ctx.report is None else f"{exc} (the report is in {folder})"
        sys.stderr.write(f"ci-bench: error: {said}\n")
        ctx.outcome = replace(ctx.outcome, github=str(exc))
        return
    message, rejudged = posted.message, posted.rejudged
    if rejudged is not None:  # the acceptance was withdrawn: the job fails as its verdict
        ctx.outcome = outcome_of(rejudged.cases, rejudged.policy, rejudged.run_states)
        ctx.out.write(f"{rejudged.headline} (the acceptance was withdrawn while this ran)\n")
    if ctx.report is None:
        ctx.out.write(f"ci-bench: {message or 'nothing to say on the pull request'}\n")
    elif message:
        sys.stderr.write(f"ci-bench: {message}\n")


def _left_to_comment_job(ctx: Context) -> bool:
    """A pull request's single job cannot write the comment with a fork's read-only token,
    or with none: the comment job will."""
    event = ctx.actions.event
    if not isinstance(event, PullRequest) or not (event.from_fork or not ctx.actions.token):
        return False
    why = "a fork's token is read-only" if event.from_fork else "no GITHUB_TOKEN"
    sys.stderr.write(f"ci-bench: comment left to the comment job ({why})\n")
    return True


STEPS: dict[Step, StepFn] = {
    Step.MEASURE: measure_step,
    Step.CONFIRM: lambda ctx: None,  # done by MEASURE, in the same workers
    Step.AB: ab_step,
    Step.MERGE: merge_step,
    Step.JUDGE: judge_step,
    Step.PUBLISH: publish_step,
    Step.COMMENT: comment_step,
    Step.LOWER: lower_step,
    Step.RELAY: relay_step,
    Step.PROMOTE: promote_step,
    Step.RECORD: record_step,
}
CHECKS: dict[Step, StepFn] = {
    Step.AB: ab_check,
    Step.PROMOTE: promote_check,
    Step.RECORD: record_check,
}


def execute(ctx: Context) -> Outcome:
    """The plan's steps in order (their checks first), then what they left to do after."""
    setup = SETUPS.get(ctx.plan.role)
    if setup is not None:
        setup(ctx)
    for step in ctx.plan.steps:
        if step in CHECKS:
            CHECKS[step](ctx)
    for step in ctx.plan.steps:
        STEPS[step](ctx)
    for after in ctx.after:
        after(ctx)
    return ctx.outcome


# Where each role keeps its files, when not in the defaults (results.json in --out-dir).


def _all(ctx: Context) -> None:
    """The single job: results or an A/B report may be handed in; the report's head is
    the pull request's."""
    inputs, event = ctx.request.inputs, ctx.actions.event
    ctx.given_results, ctx.given_ab = inputs.results, inputs.ab_report
    ctx.require_confirmation = ctx.request.confirm and inputs.results is not None
    ctx.head = event.head_sha if isinstance(event, PullRequest) else None


def _report(ctx: Context) -> None:
    """The report job: the A/B job's report when it left one (else ``ab-missing``)."""
    given = ctx.request.inputs.ab_report
    ctx.given_ab = given if given is not None and given.is_file() else None


def _shard(ctx: Context) -> None:
    """A shard grows its results in a state file that outlives the job's attempts."""
    state = _state_file(ctx.request, ctx.actions, ctx.env)
    if state is not None:
        state.parent.mkdir(parents=True, exist_ok=True)
    ctx.resume = state if state is not None and state.exists() else None
    ctx.save_to = state or ctx.request.outputs.out_dir / "results.json"
    ctx.after.append(lambda ctx: _shard_done(ctx, state))


def _shard_done(ctx: Context, state: Path | None) -> None:
    request, results = ctx.request, ctx.results
    assert results is not None
    shard = request.selection.shard
    name = f"results-{shard.index}.json" if shard else "results.json"
    out_dir = request.outputs.out_dir
    atomic_write_text(out_dir / name, dump_model(results))
    if state is not None:
        shutil.rmtree(state.parent, ignore_errors=True)  # kept only while unfinished
    ctx.out.write(f"ci-bench: {len(results.cases)} case(s) measured into {out_dir / name}\n")
    unfinished = None if results.meta.complete else "the measurement did not finish"
    ctx.outcome = Outcome(unfinished=unfinished)


def _ab(ctx: Context) -> None:
    """The A/B job writes its report for the report job."""
    ctx.after.append(_ab_done)


def _ab_done(ctx: Context) -> None:
    assert ctx.ab is not None
    path = pub.write_report_files(ctx.ab, ctx.request.outputs.out_dir, "ab-report")
    ctx.out.write(f"ci-bench: A/B against {ctx.ab.base_ref}: {ctx.ab.headline} ({path})\n")


SETUPS: dict[Role, StepFn] = {"all": _all, "report": _report, "shard": _shard, "ab": _ab}


def _state_file(request: Request, actions: ActionsContext, env: Mapping[str, str]) -> Path | None:
    """Where a shard keeps its growing results between a job's attempts: outside the
    workspace (checkout cleans it), per runner, keyed by repository, run and shard."""
    if not actions.run_id or request.selection.shard is None:
        return None
    root = env.get("CI_BENCH_STATE") or str(
        Path(env.get("RUNNER_TOOL_CACHE") or Path.home() / ".cache") / "ci-bench" / "state"
    )
    shard = request.selection.shard
    repo = actions.repository.replace("/", "_") or "local"
    key = f"{repo}-{actions.run_id}-{shard.index}of{shard.count}"
    return Path(root) / key / "results.json"


def _expected(ctx: Context) -> list[str] | None:
    """The cases the run had to measure, from the kernels' SPECs (never from the files)."""
    request = ctx.request
    try:
        specs = ctx.specs() if ctx.given_specs is not None else ctx.kernels(measuring=False).specs
    except CiBenchError as exc:  # a module that fails, hangs or crashes: the files decide
        sys.stderr.write(f"ci-bench: the expected matrix comes from the files: {exc}\n")
        return None
    whole = replace(request.selection, shard=None)
    return [c.id for c in matrix_of(whole, specs)]


def _shard_files(path: Path | None) -> list[Path]:
    if path is None:
        return []
    if path.is_dir():
        return sorted(path.rglob("results-*.json"))
    return [path] if path.is_file() else []


def _roofline(results: Results, path: Path) -> None:
    """The roofline chart beside the report, when the ``plot`` extra is installed."""
    try:
        roofline_png(results, path, table=table_peaks(results))
    except CiBenchError as exc:  # a chart is a nicety: never fails the report
        sys.stderr.write(f"ci-bench: no roofline chart: {exc}\n")


def _ab_missing_why(request: Request, env: Mapping[str, str]) -> str:
    jobs = pub._jobs(env)
    where = request.inputs.ab_report.parent if request.inputs.ab_report else None
    errors = (
        [s.error for s in pub.read_statuses(where) if s.role == "ab" and s.error] if where else []
    )
    why = f"the A/B job ended {jobs['ab']}" if jobs.get("ab") else "the A/B job left no report"
    return f"{why}: {errors[0]}" if errors else why
