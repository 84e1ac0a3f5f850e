"""The runner: one pipeline role, executed step by step as its plan says, to one Outcome.

Roles (``ci-bench ci --role ROLE``, one per workflow job): ``plan`` decides which jobs run;
``shard`` measures one shard (resumable across a job's re-run attempts); ``ab`` measures
the A/B against the merge base in workers; ``report`` merges, judges (a missing A/B is
``ab-missing``) and publishes; ``comment`` posts the ONE sticky comment (the verdict, or
why there is none, or a fork's notice); ``lower`` and ``relay`` are the lowering check and
its way into the comment; ``promote`` and ``record`` are the release and history jobs;
``all`` does everything in one job. Measuring goes through the ``open_runs`` port.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.errors import CiBenchError, InputError
from ci_bench.github.context import ActionsContext, PullRequest, WorkflowRun
from ci_bench.outcome import Outcome
from ci_bench.pipeline import publish as pub
from ci_bench.pipeline.ab import OpenRuns, resolve_base, run_ab
from ci_bench.pipeline.config import Config
from ci_bench.pipeline.judging import baseline_report, final_report, load_report, load_results
from ci_bench.pipeline.measuring import confirmed, measure, remeasure, saver, worker_runs
from ci_bench.pipeline.plan import (
    Gate,
    Plan,
    Role,
    Step,
    gate,
    plan_for,
    with_acceptance_vetted,
)
from ci_bench.pipeline.request import MODES, AbBase, Request, build_request
from ci_bench.pipeline.session import load_specs, matrix_of, open_bench
from ci_bench.schema import Report, Results
from ci_bench.schema.status import RoleStatus
from ci_bench.store.baselines import check_pins
from ci_bench.store.files import atomic_write_text, dump_model, parse_json
from ci_bench.store.merge import merge_results
from ci_bench.text import one_line


@dataclass(frozen=True)
class Ports:
    """The edges a role reaches through; tests replace them."""

    open_runs: OpenRuns = worker_runs
    # Measuring in this process (the pytest helper): the fingerprint is read here too.
    in_process: bool = False


def the_gate(config: Config, actions: ActionsContext, env: Mapping[str, str]) -> Gate:
    """The plan job's decision: read back from CI_BENCH_PLAN, or decided here (a laptop, a
    single-job workflow). The repository variable CI_BENCH_PR_MODE overrides pr-mode."""
    if env.get("CI_BENCH_PLAN"):
        # The one reader's limits (depth, finite numbers, Unicode): the variable is text
        # from another job, read like any file.
        return Gate.from_value(parse_json(env["CI_BENCH_PLAN"], "CI_BENCH_PLAN", "plan"))
    mode = env.get("CI_BENCH_PR_MODE") or config.pr_mode
    if mode not in MODES:
        raise InputError(f"CI_BENCH_PR_MODE: {mode!r} is not baseline, ab or both")
    return _vetted(gate(actions.event, mode, config.shards), config, actions)


def _vetted(gate_: Gate, config: Config, actions: ActionsContext) -> Gate:
    """An accept label counts like an approval: the labeller's permission is read from
    GitHub here, where the plan is decided (default-branch code)."""
    event = actions.event
    if gate_.acceptance is None or not isinstance(event, PullRequest):
        return gate_
    if not actions.token:
        why = f"no GITHUB_TOKEN to read @{gate_.acceptance.by}'s permission"
        return replace(gate_, acceptance=None, refused=why)
    from ci_bench.github.api import GitHubError

    try:
        permission = pub.api_client(actions, config).permission(gate_.acceptance.by)
    except GitHubError as exc:  # measured all the same; the acceptance waits for a re-run
        why = f"@{gate_.acceptance.by}'s permission could not be read ({one_line(str(exc))})"
        return replace(gate_, acceptance=None, refused=why)
    return with_acceptance_vetted(gate_, event.author, permission)


def _shard_flag(flags: dict[str, Any], gate_: Gate, env: Mapping[str, str]) -> None:
    """The shard job's share: ``--shard``, or CI_BENCH_SHARD of the plan's shard count."""
    if flags.get("shard") or not env.get("CI_BENCH_SHARD"):
        return
    index = env["CI_BENCH_SHARD"].strip()
    if not index.isdigit() or not 1 <= int(index) <= gate_.shards:
        raise InputError(f"CI_BENCH_SHARD: {index[:20]!r} is not a shard of 1..{gate_.shards}")
    flags["shard"] = f"{int(index)}/{gate_.shards}"


def run_ci(
    flags: dict[str, Any],
    config: Config,
    actions: ActionsContext,
    env: Mapping[str, str],
    out: TextIO,
    ports: Ports | None = None,
) -> Outcome:
    """Execute one role for the event: the plan, then its steps, then one Outcome."""
    ports = ports or Ports()
    role: Role = flags.get("role") or "all"
    if isinstance(actions.event, WorkflowRun) and role not in ("relay",):
        raise InputError("workflow_run events relay a report: use `ci-bench ci --role relay`")
    gate_ = the_gate(config, actions, env)
    if role == "plan":
        return _plan(gate_, actions, out)
    flags = dict(flags)
    if role == "shard":
        _shard_flag(flags, gate_, env)
    if role == "ab" and gate_.ab_base and gate_.ab_base_kind and not flags.get("base"):
        flags["ab_base"] = AbBase(gate_.ab_base_kind, gate_.ab_base)
    request = build_request(flags, config, actions.event)
    plan = plan_for(
        role,
        actions.event,
        gate_,
        mode=request.mode,
        comment=request.comment,
        publish=request.publish,
    )
    if role in ("shard", "ab", "report", "lower"):
        return _with_status(
            plan,
            request,
            gate_,
            lambda: _roles()[plan.role](plan, request, actions, env, out, ports),
        )
    return _roles()[plan.role](plan, request, actions, env, out, ports)


def _with_status(plan: Plan, request: Request, gate_: Gate, body: Callable[[], Outcome]) -> Outcome:
    """Run a measuring role and leave its status file whatever happens."""
    shard = (
        str(request.selection.shard) if plan.role == "shard" and request.selection.shard else None
    )
    request.out_dir.mkdir(parents=True, exist_ok=True)

    def status(code: int, error: str | None) -> None:
        head = gate_.head_sha
        pub.write_status(
            request.out_dir,
            RoleStatus(role=plan.role, shard=shard, exit_code=code, error=error, head_sha=head),
        )

    try:
        outcome = body()
    except CiBenchError as exc:
        status(int(exc.exit_code), one_line(str(exc), 1000))
        raise
    from ci_bench.outcome import exit_code

    code = int(exit_code(outcome))
    status(code, outcome.unfinished)
    return outcome


def _plan(gate_: Gate, actions: ActionsContext, out: TextIO) -> Outcome:
    from ci_bench.github.outputs import write_outputs

    if actions.output:
        write_outputs(actions.output, gate_.outputs())
    what = [name for name in ("measure", "ab") if getattr(gate_, name)] or ["nothing"]
    out.write(f"ci-bench plan: {', '.join(what)} ({gate_.reason})\n")
    return Outcome()


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


def measure_and_confirm(
    request: Request,
    env: Mapping[str, str],
    ports: Ports,
    save_to: Path | None,
    *,
    confirm: bool,
    resume: Path | None = None,
    specs: Mapping[str, KernelSpec] | None = None,
    cases: Sequence[Case] | None = None,
) -> Results:
    """Measure the request's cases (resuming ``resume``, else ``--resume``) saving to
    ``save_to`` after every case and, with ``confirm``, re-measure the cases the baseline
    comparison flags. ``specs`` and ``cases`` stand in for the request's modules and
    selection (the pytest helper's one case of a SPEC object)."""
    specs = specs if specs is not None else load_specs(request)
    check_pins(request.baselines.folder, request.baselines.pins)
    bench = open_bench(request, specs, env, cases=cases, in_process=ports.in_process)

    # the shard's state file or the job's own output folder: replaced as the run grows
    save = saver(save_to, replace=True)

    with ports.open_runs(bench, None) as runs:
        results = measure(bench, runs, save, resume=resume or request.resume)
        if confirm and request.confirm:
            first = baseline_report(request, results)

            def rejudge(ids: set[str]) -> Report:
                nonlocal results
                again, _ = remeasure(bench, runs, results.cases, ids)
                results = results.model_copy(update={"cases": again})
                save(results)
                return baseline_report(request, results)

            confirmed(first, rejudge, True)
    return results


def _shard(
    plan: Plan,
    request: Request,
    actions: ActionsContext,
    env: Mapping[str, str],
    out: TextIO,
    ports: Ports,
) -> Outcome:
    """Measure this shard and re-measure its flagged cases; the report job judges."""
    state = _state_file(request, actions, env)
    if state is not None:
        state.parent.mkdir(parents=True, exist_ok=True)
    resume = state if state is not None and state.exists() else None
    results = measure_and_confirm(
        request,
        env,
        ports,
        state or request.out_dir / "results.json",
        confirm=plan.has(Step.CONFIRM),
        resume=resume,
    )
    shard = request.selection.shard
    name = f"results-{shard.index}.json" if shard else "results.json"
    atomic_write_text(request.out_dir / name, dump_model(results))
    if state is not None:
        shutil.rmtree(state.parent, ignore_errors=True)  # kept only while unfinished
    out.write(f"ci-bench: {len(results.cases)} case(s) measured into {request.out_dir / name}\n")
    unfinished = None if results.meta.complete else "the measurement did not finish"
    return Outcome(unfinished=unfinished)


def _ab(
    plan: Plan,
    request: Request,
    actions: ActionsContext,
    env: Mapping[str, str],
    out: TextIO,
    ports: Ports,
) -> Outcome:
    """The A/B against the base, its report written for the report job."""
    base = resolve_base(request.config.root, request.base)  # before anything is measured
    specs = load_specs(request)
    report = run_ab(request, specs, env, base=base, open_runs=ports.open_runs)
    path = pub.write_report_files(report, request.out_dir, "ab-report")
    out.write(f"ci-bench: A/B against {report.base_ref}: {report.headline} ({path})\n")
    return Outcome()


def _expected(request: Request) -> list[str] | None:
    """The cases the run had to measure, from the kernels' SPECs (never from the files)."""
    try:
        specs = load_specs(request)
    except InputError as exc:
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
    from ci_bench.measure.roofline import table_peaks
    from ci_bench.report.plot import roofline_png

    try:
        roofline_png(results, path, table=table_peaks(results))
    except CiBenchError as exc:  # a chart is a nicety: never fails the report
        sys.stderr.write(f"ci-bench: no roofline chart: {exc}\n")


def _ab_missing_why(request: Request, env: Mapping[str, str]) -> str:
    jobs = pub._jobs(env)
    where = request.ab_report.parent if request.ab_report else None
    errors = (
        [s.error for s in pub.read_statuses(where) if s.role == "ab" and s.error] if where else []
    )
    why = f"the A/B job ended {jobs['ab']}" if jobs.get("ab") else "the A/B job left no report"
    return f"{why}: {errors[0]}" if errors else why


def _report(
    plan: Plan,
    request: Request,
    actions: ActionsContext,
    env: Mapping[str, str],
    out: TextIO,
    ports: Ports,
) -> Outcome:
    """Merge the shards, judge them with the A/B (or say it is missing), publish."""
    gate_ = plan.gate
    files = _shard_files(request.results_path)
    baseline = None
    if gate_.measure or files:
        if not files:
            raise InputError(
                f"{request.results_path}: no shard results (every shard failed or was lost)"
            )
        merged = merge_results([(str(p), load_results(p)) for p in files])
        atomic_write_text(request.out_dir / "results.json", dump_model(merged))
        _roofline(merged, request.out_dir / "roofline.png")
        baseline = baseline_report(
            request, merged, require_confirmation=request.confirm, expected=_expected(request)
        )
    ab = None
    if request.ab_report is not None and request.ab_report.is_file():
        ab = load_report(request.ab_report)
    report = final_report(
        baseline,
        ab,
        request,
        expect_ab=plan.expect_ab,
        ab_missing_why=_ab_missing_why(request, env) if plan.expect_ab and ab is None else "",
        acceptance=gate_.acceptance,
    )
    return _publish(report, request, actions, out, head=gate_.head_sha)


def _publish(
    report: Report, request: Request, actions: ActionsContext, out: TextIO, *, head: str | None
) -> Outcome:
    report = report.model_copy(update={"head_sha": head, "run_url": actions.run_url})
    path = pub.write_report_files(report, request.out_dir, "report")
    if isinstance(actions.event, PullRequest):
        pr = {
            "number": actions.event.number,
            "head_sha": actions.event.head_sha,
            "run_url": actions.run_url,
        }
        atomic_write_text(request.out_dir / "pr.json", json.dumps(pr) + "\n")
    if request.publish:
        pub.publish_locally(report, path, actions, out)
    out.write(report.headline + "\n")
    from ci_bench.judge.compare import outcome_of

    return outcome_of(report.cases, report.policy, report.run_states)


def _all(
    plan: Plan,
    request: Request,
    actions: ActionsContext,
    env: Mapping[str, str],
    out: TextIO,
    ports: Ports,
) -> Outcome:
    """The single-job pipeline: measure, confirm, the A/B, judge, publish, comment."""
    event = actions.event
    report = judged(plan, request, env, ports, save_to=request.out_dir / "results.json")
    head = event.head_sha if isinstance(event, PullRequest) else None
    outcome = _publish(report, request, actions, out, head=head)
    if not plan.has(Step.COMMENT):
        return outcome
    if isinstance(event, PullRequest) and (event.from_fork or not actions.token):
        why = "a fork's token is read-only" if event.from_fork else "no GITHUB_TOKEN"
        sys.stderr.write(f"ci-bench: comment left to the comment job ({why})\n")
        return outcome
    try:
        message = pub.comment_role(plan.gate, actions, request.config, request.out_dir, env, out)
    except CiBenchError as exc:
        if exc.exit_code != 4:
            raise
        sys.stderr.write(f"ci-bench: error: {exc} (the report is in {request.out_dir})\n")
        return replace(outcome, github=str(exc))
    if message:
        sys.stderr.write(f"ci-bench: {message}\n")
    return outcome


def judged(
    plan: Plan,
    request: Request,
    env: Mapping[str, str],
    ports: Ports,
    *,
    save_to: Path | None,
    specs: Mapping[str, KernelSpec] | None = None,
    cases: Sequence[Case] | None = None,
) -> Report:
    """An ``all`` plan's steps up to the verdict: measure and confirm (or read given
    results), the A/B (resolved first, before anything is measured), judge."""
    base = resolve_base(request.config.root, request.base) if plan.has(Step.AB) else None
    results = None
    if request.results_path is not None:
        results = load_results(request.results_path)
    elif plan.has(Step.MEASURE):
        if save_to is not None:
            save_to.parent.mkdir(parents=True, exist_ok=True)
        results = measure_and_confirm(
            request, env, ports, save_to, confirm=plan.has(Step.CONFIRM), specs=specs, cases=cases
        )
    given = request.results_path is not None
    baseline = (
        baseline_report(request, results, require_confirmation=request.confirm and given)
        if results
        else None
    )
    ab = None
    if request.ab_report is not None:
        ab = load_report(request.ab_report)
    elif base is not None:
        head = specs if specs is not None else load_specs(request)
        ab = run_ab(request, head, env, base=base, open_runs=ports.open_runs)
    return final_report(
        baseline, ab, request, expect_ab=plan.expect_ab, acceptance=plan.gate.acceptance
    )


def _comment(
    plan: Plan,
    request: Request,
    actions: ActionsContext,
    env: Mapping[str, str],
    out: TextIO,
    ports: Ports,
) -> Outcome:
    report_dir = request.report_dir or request.out_dir
    try:
        message = pub.comment_role(plan.gate, actions, request.config, report_dir, env, out)
    except CiBenchError as exc:
        if exc.exit_code != 4:
            raise
        sys.stderr.write(f"ci-bench: error: {one_line(str(exc))}\n")
        return Outcome(github=str(exc))
    out.write(f"ci-bench: {message or 'nothing to say on the pull request'}\n")
    return Outcome()


def _roles() -> dict[str, Any]:
    from ci_bench.pipeline.lowering import lower_role, relay_role
    from ci_bench.pipeline.release import promote_role, record_role

    return {
        "all": _all,
        "shard": _shard,
        "ab": _ab,
        "report": _report,
        "comment": _comment,
        "lower": lower_role,
        "relay": relay_role,
        "promote": promote_role,
        "record": record_role,
    }
