"""The runner: one pipeline role, executed step by step as its plan says, to one Outcome.

Roles (``ci-bench ci --role ROLE``, one per workflow job): ``plan`` decides which jobs run;
``shard`` measures one shard (resumable across a job's re-run attempts); ``ab`` measures
the A/B against the merge base in workers; ``report`` merges, judges (a missing A/B is
``ab-missing``) and publishes; ``comment`` posts the ONE sticky comment (the verdict, or
why there is none, or a fork's notice); ``lower`` and ``relay`` are the lowering check and
its way into the comment; ``promote`` and ``record`` are the release and history jobs;
``all`` does everything in one job. ``plan.plan_for`` lists a role's steps; this module
runs them (``steps.execute``) on one ``Context``. Measuring goes through the ``Ports``.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.errors import CiBenchError, InputError
from ci_bench.github.api import GitHubError
from ci_bench.github.context import ActionsContext, PullRequest, WorkflowRun, load_context
from ci_bench.outcome import Outcome, exit_code
from ci_bench.pipeline import publish as pub
from ci_bench.pipeline.config import Config
from ci_bench.pipeline.context import Context, Ports
from ci_bench.pipeline.parts import AbBase
from ci_bench.pipeline.plan import (
    Gate,
    Plan,
    Role,
    Step,
    gate,
    plan_for,
    role_unread,
    with_acceptance_vetted,
)
from ci_bench.pipeline.request import MODES, Request, build_request
from ci_bench.pipeline.steps import execute, gate_step
from ci_bench.schema import Report
from ci_bench.schema.status import RoleStatus
from ci_bench.store.files import parse_json
from ci_bench.text import one_line

__all__ = ["Ports", "judged", "run_ci", "the_gate"]


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
    """An accept label counts like an approval, and only while it is on the pull request:
    the labeller's role and the pull request's labels now are read from GitHub here, where
    the plan is decided (default-branch code). GitHub's own error goes to the log only."""
    event = actions.event
    if gate_.acceptance is None or not isinstance(event, PullRequest):
        return gate_
    by = gate_.acceptance.by
    if not actions.token:
        return replace(gate_, acceptance=None, refused=f"no GITHUB_TOKEN to read @{by}'s role")
    try:
        client = pub.api_client(actions, config)
        pull = client.pull_now(event.number)
        role = client.role(by)
    except GitHubError as exc:  # measured all the same; the acceptance waits for a re-run
        sys.stderr.write(f"ci-bench: {one_line(str(exc))}\n")
        return replace(gate_, acceptance=None, refused=role_unread(by))
    return with_acceptance_vetted(gate_, event.author, role.name, role.legacy, pull.labels)


def _with_plan(
    role: Role, flags: dict[str, Any], gate_: Gate, env: Mapping[str, str]
) -> dict[str, Any]:
    """The flags with what the plan job decided for this job: its shard, the A/B base."""
    flags = dict(flags)
    if role == "shard":
        _shard_flag(flags, gate_, env)
    if role == "ab" and gate_.ab_base and gate_.ab_base_kind and not flags.get("base"):
        flags["ab_base"] = AbBase(gate_.ab_base_kind, gate_.ab_base)
    return flags


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
    role: Role = flags.get("role") or "all"
    if isinstance(actions.event, WorkflowRun) and role not in ("relay",):
        raise InputError("workflow_run events relay a report: use `ci-bench ci --role relay`")
    gate_ = the_gate(config, actions, env)
    if role == "plan":  # GATE: decided before any request exists (its flags are not read)
        return gate_step(gate_, actions, out)
    request = build_request(_with_plan(role, flags, gate_, env), config, actions.event)
    plan = plan_for(
        role,
        actions.event,
        gate_,
        mode=request.mode,
        comment=request.publishing.comment,
        publish=request.publishing.publish,
    )
    ctx = Context(
        plan,
        request,
        actions,
        env,
        out,
        ports or Ports(),
        save_to=request.outputs.out_dir / "results.json",
        head=gate_.head_sha,
    )
    if role in ("shard", "ab", "report", "lower"):
        return _with_status(plan, request, gate_, lambda: execute(ctx))
    return execute(ctx)


def _with_status(plan: Plan, request: Request, gate_: Gate, body: Callable[[], Outcome]) -> Outcome:
    """Run a measuring role and leave its status file whatever happens."""
    shard = (
        str(request.selection.shard) if plan.role == "shard" and request.selection.shard else None
    )
    out_dir = request.outputs.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)

    def status(code: int, error: str | None) -> None:
        head = gate_.head_sha
        pub.write_status(
            out_dir,
            RoleStatus(role=plan.role, shard=shard, exit_code=code, error=error, head_sha=head),
        )

    try:
        outcome = body()
    except CiBenchError as exc:
        status(int(exc.exit_code), one_line(str(exc), 1000))
        raise
    code = int(exit_code(outcome))
    status(code, outcome.unfinished)
    return outcome


# The steps up to the verdict: what a one-case run (the pytest helper) takes of a plan.
_TO_VERDICT = (Step.MEASURE, Step.CONFIRM, Step.AB, Step.JUDGE)


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
    """An ``all`` plan's steps up to the verdict, with no event: measure and confirm (or
    read given results), the A/B (resolved first, before anything is measured), judge."""
    steps = tuple(s for s in plan.steps if s in _TO_VERDICT)
    ctx = Context(
        replace(plan, role="all", steps=steps),
        request,
        load_context({}),  # no event: a laptop's context
        env,
        io.StringIO(),  # no step up to the verdict prints
        ports,
        given_specs=specs,
        cases=cases,
        save_to=save_to,
    )
    execute(ctx)
    assert ctx.report is not None
    return ctx.report
