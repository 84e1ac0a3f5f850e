"""Who writes the verdict, and about which commit (issue 27): each defect found as teams
deploy ci-bench, as a scenario through the workflows' own steps
(``tests/harness/workflow_runner.py``) against the GitHub fake
(``tests/harness/github_server.py``, checked against GitHub's OpenAPI description) and a real
git repository.

The rules: the verdict section comes only from the benchmark workflow's own jobs; every
write of the comment is checked against the pull request as it is now (``GET /pulls/N``);
an accept label counts like an approval (``docs/TRUST.md``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ci_bench.report.sticky import sections_of
from tests.harness.github_openapi import now
from tests.harness.pipeline_fixtures import _world, keep
from tests.harness.pipeline_repo import (
    MAINTAINER,
    NUMBER,
    REPO,
    World,
    event,
    failures,
    git,
    make_template,
    report_of,
)
from tests.harness.workflow_runner import WorkflowRun, load

AUTHOR = "Codertocat"  # who opened the webhook examples' pull request
SUPERSEDED = "<!-- ci-bench superseded -->"  # an older comment, taken over


@pytest.fixture(scope="module")
def template_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_template(tmp_path_factory.mktemp("template"))


@pytest.fixture
def world(template_repo: Path, tmp_path: Path, tmp_path_factory) -> Iterator[World]:
    """Pull requests compared with the stored baselines only (the fastest world)."""
    cache = tmp_path_factory.getbasetemp() / "tool-cache" / "ci-bench" / "jax"
    yield from _world(template_repo, tmp_path, cache, "baseline")


def sections(world: World) -> dict[str, str]:
    return sections_of(world.the_comment().split("\n", 1)[1])


def rerun(world: World, payload: dict[str, Any]) -> WorkflowRun:
    """An event GitHub delivers again (a re-run, or a run that ends late): the pull request
    stays where it is now."""
    base = git(world.repo, "rev-parse", "master")
    [run] = world.runner.dispatch("pull_request_target", payload, "refs/heads/master", base)
    return run


def lowering_runs(world: World, payload: dict[str, Any]) -> list[WorkflowRun]:
    """GitHub's ``pull_request`` event: lower.yml (the PR's code), then lower-relay.yml."""
    base = git(world.repo, "rev-parse", "master")
    runs = world.runner.dispatch("pull_request", payload, f"refs/pull/{NUMBER}/merge", base)
    assert [r.workflow for r in runs] == ["lower.yml", "lower-relay.yml"], runs
    return runs


def comment_log(run: WorkflowRun) -> str:
    return run.job("comment")[0].step("Post the sticky comment").output


# -- 1. a fork's lowering artifact never writes the verdict ------------------------------


def test_a_forks_lower_run_never_changes_the_verdict_whatever_it_leaves_in_lowering(world):
    head = world.commit("fork", world.base, "fork change", NOTES="fork\n")
    labelled = world.on_pr(world.pull_request("labeled", head, fork=True, label="benchmark"))
    assert labelled.result("comment") == "success", failures(labelled)
    forged = report_of(labelled)
    forged["acceptance"] = {"label": "benchmark-accept", "by": MAINTAINER, "head_sha": head}
    forged["headline"] = "🤝 ci-bench: accepted"
    text = json.dumps(forged)
    files = {
        "forged/report.json": text,
        "forged/ci-bench-report/report.json": text,
        "forged/ab-report.json": text,
        "forged/status-report.json": '{"role": "report", "exit_code": 0}',
        "forged/notes.md": "### 🤝 ci-bench: accepted\n",
    }
    # 8x slower, and its module fills lowering/ on import (in the lower job).
    slower = world.commit("fork", head, "8x slower", files=files, UNITS="16", MISBEHAVE="forge")
    pushed = world.on_pr(world.pull_request("synchronize", slower, fork=True))
    assert pushed.result("comment") == "success", failures(pushed)
    before = sections(world)["verdict"]
    assert f"`{slower[:12]}` is not measured yet" in before

    lower, relay = lowering_runs(world, world.pull_request("synchronize", slower, fork=True))
    assert (lower.artifacts / "ci-bench-lowering" / "report.json").is_file()  # it was forged
    assert relay.result("relay") == "success", failures(relay)
    body = world.the_comment()
    keep(world, body)
    assert sections(world)["verdict"] == before
    assert "accepted" not in body.lower()
    assert f"@{MAINTAINER}" not in body
    assert "Reported by the pull request's own code" in sections(world)["lowering"]


# -- 2, 3. every write is about the PR as it is now ------------------------------------


def test_a_rerun_of_an_older_heads_run_does_not_overwrite_the_current_verdict(world):
    first = world.commit("feature", world.base, "notes", NOTES="one\n")
    world.on_pr(world.pull_request("opened", first))
    second = world.commit("feature", first, "more notes", NOTES="two\n")
    world.on_pr(world.pull_request("synchronize", second))
    current = sections(world)["verdict"]

    again = rerun(world, world.pull_request("opened", first))  # "Re-run jobs" on h1's run
    assert again.result("comment") == "success", failures(again)
    assert sections(world)["verdict"] == current
    assert f"`{first[:12]}`" not in world.the_comment()
    assert f"an older run for {first[:12]} finished; the PR is at {second[:12]}" in comment_log(
        again
    )


def test_a_forks_labelled_run_overtaken_by_a_push_says_the_new_head_needs_the_label(world):
    first = world.commit("fork", world.base, "fork change", NOTES="fork\n")
    second = world.commit("fork", first, "fork change 2", NOTES="fork 2\n")
    # h2 is pushed while h1's labelled run measures; h2's run ends first (no comment yet).
    world.on_pr(world.pull_request("synchronize", second, fork=True))
    assert world.comments() == []
    late = rerun(world, world.pull_request("labeled", first, fork=True, label="benchmark"))
    assert late.result("comment") == "success", failures(late)
    verdict = sections(world)["verdict"]
    keep(world, world.the_comment())
    assert f"the PR moved on to `{second[:12]}`: it needs the label again" in verdict
    assert f"`{first[:12]}` finished" not in verdict.split("\n")[0]

    # The other ordering: a needs-the-label notice is up for h3; h2's labelled run ends.
    third = world.commit("fork", second, "fork change 3", NOTES="fork 3\n")
    world.on_pr(world.pull_request("synchronize", third, fork=True))
    assert f"`{third[:12]}` is not measured yet" in sections(world)["verdict"]
    rerun(world, world.pull_request("labeled", second, fork=True, label="benchmark"))
    assert f"`{third[:12]}`" in sections(world)["verdict"]
    assert "not measured yet" in sections(world)["verdict"]


# -- 5. a failed label removal does not block the comment ------------------------------


def test_a_failed_removal_of_a_stale_accept_label_still_posts_the_verdict(world):
    head = world.commit("feature", world.base, "notes", NOTES="one\n")
    world.server.fail_next("DELETE", r"/labels/", 502, times=10)
    run = world.on_pr(world.pull_request("synchronize", head, labels=("benchmark-accept",)))
    assert run.result("comment") == "success", failures(run)
    verdict = sections(world)["verdict"]
    assert f"`{head[:12]}`" in verdict
    assert "could not be removed" in verdict
    assert "502" in verdict, verdict


# -- 6. acceptance like an approval ----------------------------------------------------


@pytest.mark.parametrize(
    ("sender", "permission", "why"),
    [
        (AUTHOR, "admin", "opened this pull request"),
        ("drive-by", "read", "has the read role"),
        (None, None, "names no sender"),
    ],
)
def test_an_accept_label_from_the_author_or_without_write_access_is_refused(
    world, sender, permission, why
):
    head = world.commit("feature", world.base, "notes", NOTES="one\n")
    payload = world.pull_request(
        "labeled", head, label="benchmark-accept", labels=("benchmark-accept",)
    )
    if sender is None:
        del payload["sender"]
    else:
        payload["sender"]["login"] = sender
        world.server.set_permission(REPO, sender, permission)
    run = world.on_pr(payload)
    assert run.result("report") == "success", failures(run)
    assert report_of(run)["acceptance"] is None
    body = world.the_comment()
    keep(world, body)
    assert "was not taken as an acceptance" in body
    assert why in body
    assert "@unknown" not in body
    assert "accepted by" not in body.lower()


# -- 8. every legacy sticky comment is taken over --------------------------------------


def test_every_older_sticky_comment_is_taken_over_whatever_workflow_it_names(world):
    comments = world.server.repos[REPO.lower()].comments
    for index, marker in enumerate(
        (
            "<!-- ci-bench sticky: benchmark|cpu:cpu:baseline -->",
            "<!-- ci-bench sticky: benchmark|tpu:v5e:pr -->",
            "<!-- ci-bench sticky: ci-bench-tpu|v5e|pr -->",  # another workflow name
        )
    ):
        stamp = now()
        body = f"{marker}\n### ❌ stale verdict {index}"
        comments[500 + index] = {
            "issue": NUMBER,
            "body": body,
            "created_at": stamp,
            "updated_at": stamp,
        }
    head = world.commit("feature", world.base, "notes", NOTES="one\n")
    run = world.on_pr(world.pull_request("opened", head))
    assert run.result("comment") == "success", failures(run)
    bodies = world.comments()
    assert not any("stale verdict" in b for b in bodies)
    current = [b for b in bodies if b.startswith(f"<!-- ci-bench sticky: benchmark|pr {NUMBER}")]
    assert len(current) == 1
    assert all(b.startswith(SUPERSEDED) for b in bodies if b not in current)


# -- 10. removing the accept label judges again ----------------------------------------


def test_removing_the_accept_label_judges_the_head_again_without_it(world):
    head = world.commit("feature", world.base, "notes", NOTES="one\n")
    accepted = world.on_pr(
        world.pull_request("labeled", head, label="benchmark-accept", labels=("benchmark-accept",))
    )
    assert report_of(accepted)["acceptance"]["by"] == MAINTAINER
    removed = world.on_pr(world.pull_request("unlabeled", head, label="benchmark-accept"))
    assert "measure" in removed.ran, failures(removed)
    assert report_of(removed)["acceptance"] is None
    assert f"@{MAINTAINER}" not in world.the_comment()
    assert f"`{head[:12]}`" in world.the_comment()


# -- 11. the promote summary after a write GitHub answered 502 -------------------------


def test_a_promote_write_answered_502_is_reported_written(world):
    payload = event("push_tag.json", after=world.base)
    world.server.fail_next("PUT", r"/contents/", 502, after=True)
    [run] = world.runner.dispatch("push", payload, payload["ref"], world.base)
    assert run.result("promote") == "success", failures(run)
    output = run.job("promote")[0].step("Measure and promote").output
    assert "written: baselines/" in output
    assert "unchanged" not in output
    assert len(world.server.commits) == 1


# -- 12. a burst of merges: every commit's history run survives ------------------------


def _survivors(workflow: dict[str, Any], pushes: list[str]) -> list[str]:
    """GitHub's concurrency: per group one running and ONE pending run; a newer pending run
    replaces the older (``cancel-in-progress: false``), a cancelling group cancels."""
    spec = workflow.get("concurrency")
    running: dict[str, str] = {}
    pending: dict[str, str] = {}
    cancelled: set[str] = set()
    for sha in pushes:  # all arrive while the first still runs
        from tests.harness.workflow_runner import interpolate

        context = {"github": {"ref": "refs/heads/main", "sha": sha, "run_id": sha}}
        group = interpolate(spec["group"], context) if spec else sha
        if group not in running:
            running[group] = sha
        else:
            if spec and spec.get("cancel-in-progress"):
                cancelled.add(running[group])
                running[group] = sha
                continue
            if group in pending:
                cancelled.add(pending[group])
            pending[group] = sha
    return [s for s in pushes if s not in cancelled]


def test_a_burst_of_merges_records_every_commit():
    pushes = [f"{i:040x}" for i in range(1, 5)]
    assert _survivors(load("history.yml"), pushes) == pushes


# -- 7. an acceptance is in the history of the merge, and on the dashboard -------------


def test_an_acceptance_is_in_the_history_record_of_its_merge_and_on_the_dashboard(world, tmp_path):
    head = world.commit("feature", world.base, "notes", NOTES="one\n")
    world.on_pr(
        world.pull_request("labeled", head, label="benchmark-accept", labels=("benchmark-accept",))
    )
    world.runner.variables["CI_BENCH_HISTORY"] = "true"
    payload = event("push_tag.json", ref="refs/heads/main", after=world.base)
    payload["head_commit"]["message"] = f"Notes (#{NUMBER})"  # derived: a squash merge
    runs = world.runner.dispatch("push", payload, "refs/heads/main", world.base)
    assert [r.workflow for r in runs] == ["history.yml", "pages.yml"]
    assert runs[0].result("record") == "success", failures(runs[0])
    files = world.server.files(REPO, "ci-bench-data")
    [path] = [p for p in files if p.startswith("history/")]
    record = json.loads(files[path].decode().splitlines()[0])
    assert record["schema_version"] == 2
    assert record["acceptance"]["by"] == MAINTAINER
    assert record["acceptance"]["head_sha"] == head
    # The dashboard of that data branch (the CLI pages.yml runs on a checkout of it).
    data = tmp_path / "data"
    data.mkdir()
    (data / path.split("/")[-1]).write_bytes(files[path])
    done = subprocess.run(
        [
            str(Path(sys.prefix) / "bin" / "ci-bench"),
            *("site", "--history", str(data), "--no-baselines"),
            *("--out", str(tmp_path / "site")),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    site = json.loads((tmp_path / "site" / "data.json").read_text())
    [commit] = [c for g in site["groups"] for c in g["commits"]]
    assert commit["accepted_by"] == MAINTAINER
    assert commit["pr"] == NUMBER


# -- 4. a base-side failure is the base's, never the PR's ------------------------------


@pytest.fixture
def ab_only(template_repo: Path, tmp_path: Path, tmp_path_factory) -> Iterator[World]:
    """The A/B alone (pr-mode ab): the pairs run in workers with the shards' time limit."""
    cache = tmp_path_factory.getbasetemp() / "tool-cache" / "ci-bench" / "jax"
    yield from _world(template_repo, tmp_path, cache, "ab")


def test_a_pr_that_fixes_the_merge_bases_crash_is_judged_alone_not_failed(ab_only):
    world = ab_only
    broken = world.commit("crashing", world.base, "a crash", MISBEHAVE="crash")
    git(world.repo, "branch", "-f", "master", broken)
    fixed = world.commit("feature", broken, "the crash fixed", MISBEHAVE="")
    run = world.on_pr(world.pull_request("opened", fixed, base=broken))

    assert run.result("ab") == "success", failures(run)
    assert run.result("report") == "success", failures(run)
    case = {c["id"]: c for c in report_of(run)["cases"]}["work/N192/float32"]
    assert case["verdict"] != "error"
    assert "the merge base's kernel crashed" in case["reason"]
    assert "head measured alone" in case["reason"]
    body = world.the_comment()
    keep(world, body)
    assert "💥" not in world.headline()
    assert "the merge base's kernel crashed" in body
    assert "head measured alone" in body


@pytest.mark.parametrize(("misbehave", "what"), [("crash-all", "crashed"), ("hang-all", "hung")])
def test_a_pr_that_fixes_a_base_kernel_that_fails_while_traced_gets_a_verdict(
    ab_only, misbehave, what
):
    """Issue 57: the merge base's kernel crashes or hangs on every case, so while the A/B
    traces it (before any pair): the workflow's A/B job still reports, the head alone."""
    world = ab_only
    broken = world.commit("broken", world.base, "broken", MISBEHAVE=misbehave)
    git(world.repo, "branch", "-f", "master", broken)
    fixed = world.commit("feature", broken, "fixed", MISBEHAVE="", CONFIG="case-timeout = 20")
    run = world.on_pr(world.pull_request("opened", fixed, base=broken))

    assert run.result("ab") == "success", failures(run)
    assert run.result("report") == "success", failures(run)
    report = report_of(run)
    assert "ab-missing" not in [s["state"] for s in report["run_states"]]
    for case in report["cases"]:
        assert case["verdict"] != "error"
        assert f"the merge base's kernel work {what} while traced" in case["reason"]
        assert case["reason"].endswith("head measured alone")
    assert "💥" not in world.headline()
    assert "re-run" not in world.the_comment()


# -- 9. a kernel of the merge base gone from the config is said, and fails -------------


def test_a_kernel_dropped_from_the_config_is_a_failing_run_level_note(ab_only):
    world = ab_only
    pyproject = (world.repo / "pyproject.toml").read_text()
    second = (world.repo / "pipeline_kernel.py").read_text().replace('name="work"', 'name="k5"')
    both = pyproject.replace(
        'kernels = ["pipeline_kernel"]', 'kernels = ["pipeline_kernel", "second_kernel"]'
    )
    base = world.commit(
        "two", world.base, "a second kernel", {"second_kernel.py": second, "pyproject.toml": both}
    )
    git(world.repo, "branch", "-f", "master", base)
    slip = world.commit("feature", base, "a merge-conflict slip", {"pyproject.toml": pyproject})
    run = world.on_pr(world.pull_request("opened", slip, base=base))

    assert run.result("ab") == "success", failures(run)
    assert run.result("report") == "failure", failures(run)
    report = report_of(run)
    assert report["run_states"] == [
        {
            "state": "kernel-removed",
            "reason": "k5: measured at the merge base, not in this PR's config",
        }
    ]
    assert report["exit_code"] == 1
    keep(world, world.the_comment())
    assert "not in this PR's config" in world.the_comment()
