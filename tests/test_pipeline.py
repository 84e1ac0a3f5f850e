"""The deployed pipeline end to end: the workflows' own steps, as GitHub would run them.

``tests/harness/workflow_runner.py`` reads ``.github/workflows/*.yml`` and runs the ``run:`` steps
of the jobs an event starts, in ``needs`` order, in clones of a real git repository, with
the Actions environment, job outputs, artifacts as folders, ``workflow_run`` chaining and
the local fake GitHub (traffic checked against GitHub's OpenAPI description). Events are
GitHub's webhook examples pointed at the test repository's commits (tests/harness/pipeline_repo.py).

The kernel measured is tiny (two cases, one per shard, three repeats, twelve A/B rounds), so
each workflow run takes well under a minute on a small CPU. Every scenario of the
pipeline-in-code issue is here, each with its assertion.
This file: the happy path, faults, the verdict, and the lowering check;
forks, labels and the other events are in tests/test_pipeline_events.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness import pipeline_fixtures
from tests.harness.pipeline_fixtures import _world, keep
from tests.harness.pipeline_repo import NUMBER, TOKEN, failures, git, report_of
from tests.harness.workflow_runner import load, load_called

template, jax_cache = pipeline_fixtures.template, pipeline_fixtures.jax_cache
world, ab_world = pipeline_fixtures.world, pipeline_fixtures.ab_world


# -- the happy path, faults included ---------------------------------------------------


def test_a_pull_request_is_measured_in_shards_reported_and_commented_once(world):
    first = world.commit("feature", world.base, "notes", NOTES="one\n")
    # GitHub creates the comment and still answers 502: it must not be created twice.
    world.server.fail_next("POST", r"/issues/\d+/comments$", 502, after=True)
    run = world.on_pr(world.pull_request("opened", first))

    assert run.ran == ["plan", "measure", "measure", "report", "comment"], failures(run)
    assert {j.result for j in run.jobs if j.result != "skipped"} == {"success"}, failures(run)
    assert run.concurrency_group == f"ci-bench-benchmark-{NUMBER}"
    for leg in run.job("measure"):
        assert git(leg.workspace, "rev-parse", "HEAD") == first  # the head, not a merge
        assert not (leg.workspace / ".cache").exists()
    report = report_of(run)
    assert sorted(c["id"] for c in report["cases"]) == ["work/N128/float32", "work/N192/float32"]
    assert report["meta"]["git"]["commit"] == first
    assert report["head_sha"] == first
    body = world.the_comment()
    keep(world, body)
    assert body.startswith(f"<!-- ci-bench sticky: benchmark|pr {NUMBER} -->")
    assert f"/actions/runs/{run.run_id}" in body
    assert body.count(f"/actions/runs/{run.run_id})") == 1  # the run link, once
    assert body.count(f"`{first[:12]}`") == 1  # the head, once
    assert "Δ vs base (A/B)" not in body  # no A/B footnote in a baseline-only comment
    assert TOKEN not in body

    second = world.commit("feature", first, "more notes", NOTES="two\n")
    rerun = world.on_pr(world.pull_request("synchronize", second))
    assert rerun.ran == ["plan", "measure", "measure", "report", "comment"], failures(rerun)
    edited = world.the_comment()
    assert f"`{second[:12]}`" in edited
    assert f"`{first[:12]}`" not in edited
    assert f"/actions/runs/{rerun.run_id}" in edited


def test_a_comment_refused_by_github_fails_only_the_comment_job_and_loses_nothing(world):
    head = world.commit("feature", world.base, "notes", NOTES="one\n")
    world.server.fail_next("POST", r"/issues/\d+/comments$", 403, times=5)
    run = world.on_pr(world.pull_request("opened", head))

    assert run.result("report") == "success", failures(run)
    assert run.result("comment") == "failure"
    posted = run.job("comment")[0].step("Post the sticky comment")
    assert "HTTP 403" in posted.output
    assert "Traceback" not in posted.output
    assert report_of(run)["head_sha"] == head  # the report artifact is all there
    assert world.comments() == []


# -- the verdict is about this PR ------------------------------------------------------


def test_a_pr_behind_main_is_not_blamed_for_mains_speed_up(ab_world):
    """The +5388 % case: main got 20x faster after the branch; the PR edits notes only."""
    world = ab_world
    slow = world.commit("slow-base", world.base, "a slow kernel", UNITS="40")
    git(world.repo, "branch", "-f", "master", slow)
    head = world.commit("feature", slow, "docs only", NOTES="a typo fixed\n")
    fast = world.commit("speed-up", slow, "20x faster kernel", UNITS="2")
    git(world.repo, "branch", "-f", "master", fast)  # main moved on after the branch
    run = world.on_pr(world.pull_request("opened", head, base=fast))

    assert sorted(run.ran) == sorted(["plan", "measure", "measure", "ab", "report", "comment"])
    assert run.result("report") == "success", failures(run)
    report = report_of(run)
    assert report["mode"] == "pr"
    assert report["base_ref"] == f"merge base {slow[:12]}; the base branch is at {fast[:12]}"
    assert {c["verdict"] for c in report["cases"]} <= {"new", "pass", "noisy"}
    ratios = {c["id"]: c["ratio"] for c in report["cases"]}
    assert all(abs(r - 1) < 0.5 for r in ratios.values()), ratios  # head ~ merge base
    assert report["exit_code"] == 0
    keep(world, world.the_comment())
    assert "slower" not in world.headline()  # noisy at most: 8 rounds on a shared CPU


def test_a_lost_ab_is_named_in_the_headline_and_fails_never_a_silent_baseline_verdict(ab_world):
    world = ab_world
    world.runner.lose.add(("ab", json.dumps({})))
    head = world.commit("feature", world.base, "notes", NOTES="one\n")
    run = world.on_pr(world.pull_request("opened", head))

    assert run.result("ab") == "failure"
    assert run.result("report") == "failure", failures(run)
    report = report_of(run)
    assert [s["state"] for s in report["run_states"]] == ["ab-missing"]
    assert report["exit_code"] == 1
    keep(world, world.the_comment())
    assert "the A/B against the base is missing" in world.headline()
    assert len(world.comments()) == 1


@pytest.mark.parametrize(
    ("misbehave", "error"), [("crash", "killed by signal SIGSEGV"), ("hang", "timed out after")]
)
def test_a_crashing_or_hanging_ab_case_is_an_error_and_the_other_is_measured(
    template, tmp_path, jax_cache, misbehave, error
):
    # The A/B alone (pr-mode ab): its pairs run in workers with the shards' time limit.
    for world in _world(template, tmp_path, jax_cache, "ab"):
        head = world.commit(
            "feature", world.base, misbehave, MISBEHAVE=misbehave, CONFIG="case-timeout = 15"
        )
        run = world.on_pr(world.pull_request("opened", head))

        assert run.ran == ["plan", "ab", "report", "comment"], failures(run)
        assert run.result("ab") == "success", failures(run)
        cases = {c["id"]: c for c in report_of(run)["cases"]}
        assert cases["work/N192/float32"]["verdict"] == "error"
        assert error in cases["work/N192/float32"]["reason"]
        assert cases["work/N128/float32"]["ratio"] is not None  # measured as a pair
        assert run.result("report") == "failure"
        assert "work/N192/float32" in world.the_comment()


def test_all_shards_failing_say_why_in_the_same_comment(world):
    good = world.commit("feature", world.base, "notes", NOTES="one\n")
    world.on_pr(world.pull_request("opened", good))
    assert len(world.comments()) == 1
    broken = world.commit("feature", good, "broken import", MISBEHAVE="import")
    run = world.on_pr(world.pull_request("synchronize", broken))

    assert run.result("measure") == "failure"
    assert run.result("report") == "failure"
    assert run.result("comment") == "success", failures(run)
    body = world.the_comment()  # the same comment, edited: no stale verdict left up
    keep(world, body)
    assert f"benchmark failed for `{broken[:12]}`" in body
    assert "no longer imports" in body
    assert f"`{good[:12]}`" not in body
    assert f"/actions/runs/{run.run_id}" in body


# -- the lowering check, every pull request --------------------------------------------


def test_every_pr_gets_lowering_in_the_one_comment_forks_included(world):
    head = world.commit("fork", world.base, "fork change", NOTES="fork\n")
    world.on_pr(world.pull_request("opened", head, fork=True), lowering=True)
    lower, relay = world.lowering_runs
    assert lower.result("lower") == "success", failures(lower)
    assert relay.result("relay") == "success", failures(relay)
    body = world.the_comment()
    assert "cases lower for TPU" in body
    # Exact feedback with nothing timed: the cost model against the merge base.
    assert f"no structural change by the cost model against merge base {world.base[:12]}" in body
    assert f"`{head[:12]}` is not measured yet" in body  # waiting for the label

    labelled = world.on_pr(world.pull_request("labeled", head, fork=True, label="benchmark"))
    assert labelled.result("comment") == "success", failures(labelled)
    body = world.the_comment()  # the verdict joined the lowering section: one comment
    keep(world, body)
    assert "cases lower for TPU" in body
    assert "not measured yet" not in body
    assert f"/actions/runs/{labelled.run_id}" in body


def _jobs_of(name: str) -> list[tuple[str, dict, dict]]:
    """(file, trigger, job) for every job a workflow runs, called workflows' jobs included
    (with the caller's trigger: a reusable workflow runs under its caller's event)."""
    workflow = load(name)
    found = []
    for job in workflow["jobs"].values():
        if "uses" in job:
            called = load_called(job["uses"])
            found += [(name, workflow["on"], inner) for inner in called["jobs"].values()]
        else:
            found.append((name, workflow["on"], job))
    return found


def test_no_fork_code_runs_where_credentials_or_the_tpu_runners_are():
    """Structure: only default-branch YAML reaches self-hosted runners; every checkout of
    pull-request code in a pull_request_target job is explicit and label-gated; only jobs
    that run no pull-request code have a write token."""
    workflows = Path(__file__).resolve().parents[1] / ".github" / "workflows"
    for path in workflows.glob("*.yml"):
        text = path.read_text()
        assert text.count("allow-unsafe-pr-checkout: true  # ") == text.count(
            "allow-unsafe-pr-checkout"
        ), f"{path.name}: every unsafe checkout carries its reason"
        for name, on, job in _jobs_of(path.name):
            runs_on = str(job.get("runs-on") or "")
            if "self-hosted" in runs_on or "inputs.runner" in runs_on:
                assert "pull_request" not in on, f"{name}: PR-controlled YAML on TPU runners"
            writes = {k for k, v in (job.get("permissions") or {}).items() if v == "write"}
            pr_code = False
            for step in job["steps"]:
                if not step.get("uses", "").startswith("actions/checkout"):
                    continue
                assert step["with"]["persist-credentials"] is False
                ref = str(step["with"].get("ref", ""))
                if "pull_request_target" in on and "head.sha" in ref:
                    pr_code = True
                    assert step["with"].get("allow-unsafe-pr-checkout") is True, name
                    assert "needs.plan.outputs" in str(job.get("if", "")), name
            assert not (pr_code and writes), f"{name} writes and runs PR code"
    pipeline = load("ci-bench.yml")
    assert pipeline["permissions"] == {"contents": "read"}
    assert "ref" not in pipeline["jobs"]["plan"]["steps"][0]["with"]  # default branch
    assert "ref" not in pipeline["jobs"]["comment"]["steps"][0]["with"]
