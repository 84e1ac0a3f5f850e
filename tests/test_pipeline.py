"""The deployed pipeline end to end: the workflows' own steps, as GitHub would run them.

``tests/harness/workflow_runner.py`` reads ``.github/workflows/*.yml`` and runs the ``run:`` steps
of the jobs an event starts, in ``needs`` order, in clones of a real git repository, with
the Actions environment, job outputs, artifacts as folders, ``workflow_run`` chaining and
the local fake GitHub (traffic checked against GitHub's OpenAPI description). Events are
GitHub's webhook examples pointed at the test repository's commits (tests/harness/pipeline_repo.py).

The kernel measured is tiny (two cases, one per shard, three repeats, twelve A/B rounds), so
each workflow run takes well under a minute on a small CPU. Every scenario of the
pipeline-in-code issue is here, each with its assertion.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ci_bench.github.context import parse_event
from ci_bench.pipeline.plan import gate
from tests.harness.pipeline_repo import (
    MAINTAINER,
    NUMBER,
    REPO,
    TOKEN,
    World,
    event,
    failures,
    git,
    make_template,
    new_world,
    report_of,
)
from tests.harness.workflow_runner import evaluate, interpolate, load, load_called, triggers

TPU_JOBS = ("measure", "ab")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_template(tmp_path_factory.mktemp("template"))


@pytest.fixture(scope="module")
def jax_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runners' JAX compilation cache: outside every workspace, shared across runs."""
    return tmp_path_factory.mktemp("tool-cache") / "ci-bench" / "jax"


def _world(template: Path, tmp_path: Path, jax_cache: Path, mode: str) -> Iterator[World]:
    world, server = new_world(template, tmp_path, jax_cache, mode)
    try:
        yield world
        server.assert_no_violations()
    finally:
        server.__exit__(None, None, None)


@pytest.fixture
def world(template, tmp_path, jax_cache) -> Iterator[World]:
    """Pull requests compared with the stored baselines only (no A/B job)."""
    yield from _world(template, tmp_path, jax_cache, "baseline")


@pytest.fixture
def ab_world(template, tmp_path, jax_cache) -> Iterator[World]:
    """The default pull-request mode: the A/B against the merge base decides."""
    yield from _world(template, tmp_path, jax_cache, "both")


def keep(world: World, body: str, name: str = "comment.md") -> None:
    """The comment a scenario checked, kept beside its runs for a reader, and in
    ``$CI_BENCH_TEST_ARTIFACTS`` (``.ci/run`` sets it to its output folder)."""
    (world.runner.root / name).write_text(body)
    folder = os.environ.get("CI_BENCH_TEST_ARTIFACTS")
    if folder:
        test = os.environ.get("PYTEST_CURRENT_TEST", "test").split("::")[-1].split(" ")[0]
        target = Path(folder) / "pipeline" / test
        target.mkdir(parents=True, exist_ok=True)
        (target / name).write_text(body)


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


# -- the lowering check, every pull request --------------------------------------------


def test_every_pr_gets_lowering_in_the_one_comment_forks_included(world):
    head = world.commit("fork", world.base, "fork change", NOTES="fork\n")
    world.on_pr(world.pull_request("opened", head, fork=True), lowering=True)
    lower, relay = world.lowering_runs
    assert lower.result("lower") == "success", failures(lower)
    assert relay.result("relay") == "success", failures(relay)
    body = world.the_comment()
    assert "cases lower for tpu" in body
    # Exact feedback with nothing timed: the cost model against the merge base.
    assert f"no structural change by the cost model against merge base {world.base[:12]}" in body
    assert f"`{head[:12]}` is not measured yet" in body  # waiting for the label

    labelled = world.on_pr(world.pull_request("labeled", head, fork=True, label="benchmark"))
    assert labelled.result("comment") == "success", failures(labelled)
    body = world.the_comment()  # the verdict joined the lowering section: one comment
    keep(world, body)
    assert "cases lower for tpu" in body
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
