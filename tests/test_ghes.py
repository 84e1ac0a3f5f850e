"""GitHub Enterprise Server is not supported, and says so (issue 38): there
``job.workflow_sha`` and ``job.workflow_repository`` are empty (GitHub's contexts reference:
"not available on GitHub Enterprise Server") and the artifact actions v4+ the pipeline needs
(another run's artifact, patterns) are not available either (docs/GITHUB_ACTIONS.md). The
reusable workflows then fail at their first step that needs ci-bench's own commit, naming
why, instead of running the adopter's repository as ci-bench."""

from __future__ import annotations

from tests.harness import pipeline_fixtures
from tests.harness.workflow_runner import WORKFLOWS, load

template, jax_cache = pipeline_fixtures.template, pipeline_fixtures.jax_cache
world = pipeline_fixtures.world
WHY = "no-job.workflow_sha-on-GitHub-Enterprise-Server-which-ci-bench-does-not-support"


def test_on_github_enterprise_server_the_pipeline_stops_at_ci_benchs_checkout_saying_why(world):
    world.runner.enterprise = True
    head = world.commit("feature", world.base, "notes", NOTES="one\n")
    run = world.on_pr(world.pull_request("opened", head))
    assert run.ran == ["plan"]
    [plan] = run.job("plan")
    assert plan.result == "failure"
    # The repository's own checkout works; ci-bench's (the second) asks for the ref that
    # says why, and fails: never the adopter's repository set up as if it were ci-bench.
    assert [s.outcome for s in plan.steps] == ["success", "failure", "skipped", "skipped"]
    assert plan.steps[1].name.startswith("actions/checkout@")
    assert world.runner.foreign_checkouts == []
    assert world.comments() == []


def test_every_checkout_of_ci_bench_itself_names_why_it_fails_on_enterprise_server():
    for path in sorted(WORKFLOWS.glob("ci-bench*.yml")):
        workflow = load(path.name)
        for job in workflow["jobs"].values():
            for step in job.get("steps", []):
                with_ = step.get("with") or {}
                if with_.get("path") == ".ci-bench":
                    assert with_["ref"] == "${{ job.workflow_sha || '" + WHY + "' }}", path
