"""Renaming a step changes nothing a test sees: a pull request runs through ci-bench's
workflows and actions as they are and through a copy with every step renamed, and both
runs ran the same jobs and steps with the same outcomes, outputs, report and headline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.harness.pipeline_repo import World, failures, make_template, new_world, report_of
from tests.harness.test_workflow_steps import renamed_copy
from tests.harness.workflow_results import WorkflowRun


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_template(tmp_path_factory.mktemp("template"))


def _pull_request(template: Path, tmp: Path, github: Path | None) -> tuple[World, WorkflowRun]:
    """One pull request (a notes change, baseline mode) in a fresh world whose runner reads
    ci-bench's ``.github`` from ``github`` (this checkout's when None)."""
    world, server = new_world(template, tmp, tmp / "jax-cache", "baseline")
    try:
        if github is not None:
            world.runner.workflows, world.runner.own = github / "workflows", github
        head = world.commit("feature", world.base, "notes", NOTES="one\n")
        run = world.on_pr(world.pull_request("opened", head))
        server.assert_no_violations()
        return world, run
    finally:
        server.__exit__(None, None, None)


def _seen(world: World, run: WorkflowRun) -> dict[str, Any]:
    """What a test reads from a run, the step names and commit hashes left out."""
    head = run.payload["pull_request"]["head"]["sha"]
    return {
        "ran": run.ran,
        "jobs": [
            (
                job.job,
                job.matrix,
                job.result,
                [step.outcome for step in job.steps],
                {k: v.replace(head, "HEAD") for k, v in job.outputs.items()},
            )
            for job in run.jobs
        ],
        "cases": sorted((c["id"], c["verdict"]) for c in report_of(run)["cases"]),
        "headline": world.headline(),
        "comments": len(world.comments()),
    }


def test_renaming_every_step_leaves_a_pull_requests_run_unchanged(template, tmp_path):
    renamed = renamed_copy(tmp_path / "renamed" / ".github")
    world, run = _pull_request(template, tmp_path / "as-is", None)
    again_world, again = _pull_request(template, tmp_path / "renamed-run", renamed)

    assert run.ran == ["plan", "measure", "measure", "report", "comment"], failures(run)
    names = {step.name for job in again.jobs for step in job.steps}
    assert all(name.startswith("step ") for name in names), names  # the copy ran
    assert not names & {step.name for job in run.jobs for step in job.steps}
    # The install steps were stood in for in both (skipped), not run for real.
    assert "skipped" in _seen(world, run)["jobs"][0][3]
    assert _seen(again_world, again) == _seen(world, run), failures(again)
