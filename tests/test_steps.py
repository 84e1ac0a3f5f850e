"""The plan is the program: every step a plan can list has its function in the table the
runner dispatches on, and nothing else decides what a role does."""

from __future__ import annotations

import pytest

from ci_bench.github.context import parse_event
from ci_bench.pipeline.plan import ROLES, Gate, Step, plan_for
from ci_bench.pipeline.steps import CHECKS, SETUPS, STEPS


def test_every_step_but_the_gate_is_in_the_table():
    # GATE runs before any request exists (run.run_ci): the plan job reads no flags.
    assert set(STEPS) == set(Step) - {Step.GATE}
    assert set(CHECKS) <= set(STEPS)


@pytest.mark.parametrize("role", [r for r in ROLES if r != "plan"])
@pytest.mark.parametrize("mode", ["baseline", "ab", "both"])
@pytest.mark.parametrize("publish", [True, False])
def test_every_planned_step_runs_through_the_table(role, mode, publish):
    release = parse_event("push", {"ref": "refs/tags/v1.0.0"}, None)
    for event in (None, release):
        plan = plan_for(role, event, Gate(), mode=mode, comment=True, publish=publish)
        assert all(step in STEPS for step in plan.steps), plan
        assert set(SETUPS) <= set(ROLES)


def test_the_single_job_always_writes_its_report_files():
    """--no-publish skips the summary, outputs and annotations, never the report files."""
    plan = plan_for("all", None, Gate(), mode="baseline", comment=True, publish=False)
    assert plan.steps == (Step.MEASURE, Step.CONFIRM, Step.JUDGE, Step.PUBLISH)
