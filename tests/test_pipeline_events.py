"""The deployed pipeline end to end (see tests/test_pipeline.py): forks, labels, acceptance,
and the events other than a pull request (dispatch, tag, push, release).
"""

from __future__ import annotations

import json
from pathlib import Path

from ci_bench.github.context import parse_event
from ci_bench.pipeline.plan import gate
from tests.harness import pipeline_fixtures
from tests.harness.pipeline_fixtures import _world, keep
from tests.harness.pipeline_repo import MAINTAINER, NUMBER, REPO, event, failures, git, report_of
from tests.harness.workflow_runner import evaluate, interpolate, load, triggers

template, jax_cache = pipeline_fixtures.template, pipeline_fixtures.jax_cache
world, ab_world = pipeline_fixtures.world, pipeline_fixtures.ab_world


TPU_JOBS = ("measure", "ab")


# -- forks, labels, acceptance ---------------------------------------------------------


def test_a_fork_runs_only_on_the_label_and_its_next_push_needs_the_label_again(world):
    head = world.commit("fork", world.base, "fork change", NOTES="fork\n")
    unlabelled = world.on_pr(world.pull_request("synchronize", head, fork=True))
    # Nothing on the TPU runners; the comment job finds no comment to correct.
    assert unlabelled.ran == ["plan", "comment"], failures(unlabelled)
    assert unlabelled.concurrency_group != f"ci-bench-benchmark-{NUMBER}"
    assert world.comments() == []

    labelled = world.on_pr(world.pull_request("labeled", head, fork=True, label="benchmark"))
    assert labelled.ran == ["plan", "measure", "measure", "report", "comment"], failures(labelled)
    assert labelled.concurrency_group == f"ci-bench-benchmark-{NUMBER}"
    assert {git(leg.workspace, "rev-parse", "HEAD") for leg in labelled.job("measure")} == {head}
    assert f"`{head[:12]}`" in world.the_comment()

    newer = world.commit("fork", head, "fork change 2", NOTES="fork 2\n")
    pushed = world.on_pr(world.pull_request("synchronize", newer, fork=True))
    assert pushed.ran == ["plan", "comment"], failures(pushed)  # no pull-request code ran
    assert not any(j.job in TPU_JOBS and j.result != "skipped" for j in pushed.jobs)
    body = world.the_comment()
    keep(world, body)
    assert f"`{newer[:12]}` is not measured yet" in body
    assert "`benchmark`" in body


def test_an_accepted_regression_passes_for_its_head_and_fails_again_after_a_push(
    template, tmp_path, jax_cache
):
    for world in _world(template, tmp_path, jax_cache, "ab"):
        slower = world.commit("feature", world.base, "8x the work", UNITS="16")
        first = world.on_pr(world.pull_request("opened", slower))
        assert first.result("report") == "failure", failures(first)
        assert "regression" in {c["verdict"] for c in report_of(first)["cases"]}

        accepted = world.on_pr(
            world.pull_request(
                "labeled", slower, label="benchmark-accept", labels=("benchmark-accept",)
            )
        )
        assert accepted.result("report") == "success", failures(accepted)
        report = report_of(accepted)
        assert report["acceptance"] == {
            "label": "benchmark-accept",
            "by": MAINTAINER,
            "head_sha": slower,
        }
        assert "accepted" in {c["verdict"] for c in report["cases"]}
        body = world.the_comment()
        keep(world, body, "accepted.md")
        assert f"@{MAINTAINER}" in body
        assert slower[:12] in body

        again = world.commit("feature", slower, "another push", NOTES="n\n")
        pushed = world.on_pr(world.pull_request("synchronize", again, labels=("benchmark-accept",)))
        assert pushed.result("report") == "failure", failures(pushed)
        assert "accepted" not in {c["verdict"] for c in report_of(pushed)["cases"]}
        assert "benchmark-accept" not in world.server.labels(REPO, NUMBER)
        assert pushed.result("comment") == "success", failures(pushed)
        assert "label was removed" in world.the_comment(), pushed.job("comment")[0].steps


def test_another_label_starts_no_measurement_and_cancels_nothing(world):
    head = world.commit("feature", world.base, "notes", NOTES="one\n")
    run = world.on_pr(world.pull_request("labeled", head, label="bug"))
    assert run.ran == ["plan"]
    assert run.concurrency_group != f"ci-bench-benchmark-{NUMBER}"
    assert world.comments() == []


def test_the_concurrency_group_agrees_with_the_plan_for_every_event():
    """GitHub evaluates concurrency before any job: its expression restates the plan's
    label rule, and must say 'measuring' exactly when the plan measures."""
    workflow = load("ci-bench.yml")
    group = workflow["concurrency"]["group"]
    cases = []
    for action in ("opened", "synchronize", "reopened", "labeled", "unlabeled"):
        for fork in (False, True):
            for label in ("bug", "benchmark", "benchmark-accept"):
                labelling = action in ("labeled", "unlabeled")
                name = "pull_request_labeled.json" if labelling else "pull_request_opened.json"
                payload = event(name, action=action)
                if fork:
                    payload["pull_request"]["head"]["repo"]["full_name"] = "someone/fork"
                if labelling:
                    payload["label"]["name"] = label
                cases.append(payload)
    for payload in cases:
        context = {
            "github": {
                "event_name": "pull_request_target",
                "event": payload,
                "repository": payload["repository"]["full_name"],
                "ref": "refs/heads/master",
                "run_id": "7",
                "workflow": "benchmark",
            }
        }
        idle = "-idle-" in interpolate(group, context)
        planned = gate(parse_event("pull_request_target", payload, None), "both")
        assert idle is not planned.measure, (payload["action"], planned.reason)
    assert evaluate("fromJSON('[1, 2]')", {}) == [1, 2]


# -- other events ----------------------------------------------------------------------


def test_a_dispatch_in_mode_both_without_a_base_compares_with_the_default_branch(ab_world):
    world = ab_world
    inputs = {"profile": "smoke", "repeats": "8", "fail_on": "none", "mode": "both"}
    payload = event("workflow_dispatch.json", inputs=inputs)
    payload["repository"]["full_name"] = REPO
    payload["repository"]["default_branch"] = "master"
    runs = world.runner.dispatch(
        "workflow_dispatch", payload, "refs/heads/master", world.base, "benchmark.yml"
    )
    [run] = runs
    assert sorted(run.ran) == sorted(["plan", "measure", "measure", "ab", "report"]), failures(run)
    report = report_of(run)
    assert report["mode"] == "pr"  # the A/B ran: not a silent baseline-only verdict
    assert report["base_ref"].startswith("master (the default branch)")
    assert report["meta"]["settings"]["repeats"] == 8
    assert world.comments() == []


def test_a_tag_promotes_once_through_a_409_and_its_rerun_changes_nothing(world):
    payload = event("push_tag.json", after=world.base)
    assert payload["ref"] == "refs/tags/v0.2.0"
    # A concurrent change of the file on the default branch: the write is re-read, retried.
    world.server.fail_next("PUT", r"/contents/", 409)
    runs = world.runner.dispatch("push", payload, payload["ref"], world.base)
    assert [r.workflow for r in runs] == ["promote.yml"]
    assert runs[0].result("promote") == "success", failures(runs[0])
    files = world.server.files(REPO)
    [name] = [p for p in files if p.startswith("baselines/")]
    entry = json.loads(files[name].decode())["entries"][0]
    assert entry["provenance"]["tag"] == "v0.2.0"
    assert entry["device"]["hostname"] == ""
    assert str(world.runner.root) not in files[name].decode()
    commits = len(world.server.commits)

    again = world.runner.dispatch("push", payload, payload["ref"], world.base)
    assert again[0].result("promote") == "success", failures(again[0])
    assert "unchanged" in again[0].job("promote")[0].step("Measure and promote").output
    assert len(world.server.commits) == commits


def test_a_push_to_main_records_one_history_entry_with_the_pinned_toolchain(world):
    world.runner.variables["CI_BENCH_HISTORY"] = "true"
    payload = event("push_tag.json", ref="refs/heads/main", after=world.base)
    payload["head_commit"]["message"] = "Faster kernel (#7)"  # derived: a squash merge
    runs = world.runner.dispatch("push", payload, "refs/heads/main", world.base)
    # The history run, then the dashboard it starts (workflow_run).
    assert [r.workflow for r in runs] == ["history.yml", "pages.yml"]
    assert runs[0].result("record") == "success", failures(runs[0])
    assert runs[1].result("deploy") == "success", failures(runs[1])
    pages = runs[1].artifacts / "github-pages"
    assert (pages / "index.html").is_file()  # the dashboard
    assert (pages / "docs" / "CLI" / "index.html").is_file()  # and the docs site beside it
    files = world.server.files(REPO, "ci-bench-data")
    [path] = [p for p in files if p.startswith("history/")]
    record = json.loads(files[path].decode().splitlines()[0])
    assert record["commit"] == world.base
    assert record["pr"] == 7
    assert not (runs[0].job("record")[0].workspace / ".venv").exists()


def test_a_published_release_starts_only_the_package_build_its_tag_push_promoted():
    payload = event("release_published.json")
    workflows = Path(__file__).resolve().parents[1] / ".github" / "workflows"
    started = [
        p.name
        for p in sorted(workflows.glob("*.yml"))
        if triggers(load(p.name), "release", payload)
    ]
    assert started == ["package.yml"]
