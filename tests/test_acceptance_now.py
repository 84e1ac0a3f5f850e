"""An acceptance is a property of the pull request as it is now (issue 38), through the
workflows' own steps (``tests/harness/workflow_runner.py``) against the GitHub fake (checked
against GitHub's OpenAPI description) and a real git repository.

The accept label must be on the pull request when the comment is written, applied by
someone whose role (``role_name``) allows it; a re-run of the accepting run, or a run that
ends after the label was removed, never brings back what the maintainer withdrew, and says
why. A failed lookup never puts GitHub's transport error into the public comment.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ci_bench.report.sticky import sections_of
from tests.harness import pipeline_fixtures
from tests.harness.pipeline_fixtures import _world, keep
from tests.harness.pipeline_repo import (
    MAINTAINER,
    NUMBER,
    REPO,
    World,
    failures,
    git,
    report_of,
)
from tests.harness.workflow_runner import WorkflowRun

template, jax_cache = pipeline_fixtures.template, pipeline_fixtures.jax_cache
world = pipeline_fixtures.world
ACCEPT = "benchmark-accept"
ZWJ = "\u200d"  # what the comment puts after an @ it quotes: no notification


@pytest.fixture
def ab_only(template: Path, tmp_path: Path, jax_cache: Path) -> Iterator[World]:
    """The A/B alone decides (pr-mode ab): an 8x slower head is a confirmed regression."""
    yield from _world(template, tmp_path, jax_cache, "ab")


def verdict(world: World) -> str:
    return sections_of(world.the_comment().split("\n", 1)[1])["verdict"]


def redelivered(world: World, payload: dict[str, Any]) -> WorkflowRun:
    """The same event run again ("Re-run jobs", or a run that ends late): the pull request
    stays as it is now on GitHub."""
    base = git(world.repo, "rev-parse", "master")
    [run] = world.runner.dispatch("pull_request_target", payload, "refs/heads/master", base)
    return run


def accepted_then_withdrawn(world: World, *, fork: bool) -> tuple[str, dict[str, Any]]:
    """An 8x slower head accepted by the maintainer, then the label taken off again."""
    slower = world.commit("slow", world.base, "8x the work", UNITS="16")
    if not fork:
        first = world.on_pr(world.pull_request("opened", slower))
        assert first.result("report") == "failure", failures(first)
    labelled = world.pull_request("labeled", slower, fork=fork, label=ACCEPT, labels=(ACCEPT,))
    accepting = world.on_pr(labelled)
    assert accepting.result("report") == "success", failures(accepting)
    assert f"Accepted by @{MAINTAINER}" in world.the_comment()
    removed = world.on_pr(world.pull_request("unlabeled", slower, fork=fork, label=ACCEPT))
    assert removed.result("comment") == "success", failures(removed)
    assert ACCEPT not in world.server.labels(REPO, NUMBER)
    return slower, labelled


@pytest.mark.parametrize("fork", [False, True], ids=["same-repository", "fork"])
def test_a_rerun_of_the_accepting_run_after_the_label_was_removed_accepts_nothing(ab_only, fork):
    world = ab_only
    slower, labelled = accepted_then_withdrawn(world, fork=fork)
    after_removal = verdict(world)

    again = redelivered(world, labelled)  # "Re-run jobs" on the accepting run
    body = world.the_comment()
    keep(world, body)
    assert report_of(again)["acceptance"] is None
    assert "accepted" not in {c["verdict"] for c in report_of(again)["cases"]}
    assert again.result("report") == "failure", failures(again)  # no green check
    assert world.headline().startswith("### ❌"), world.headline()
    assert f"Accepted by @{MAINTAINER}" not in body
    assert "ci-bench acceptance:" not in body  # nothing for the merge's history record
    assert "is no longer on the pull request" in verdict(world)
    assert "a re-run or a late run never brings back a withdrawn acceptance" in verdict(world)
    if fork:  # its head is measured only on a label: the removal took the accepted verdict down
        assert f"the acceptance of `{slower[:12]}` was withdrawn" in after_removal


def test_a_label_removed_while_the_accept_run_measures_is_withdrawn_in_its_comment(ab_only):
    """A fork: the ``unlabeled`` run has a concurrency group of its own, ends first, and the
    accept run, past its plan, then writes the comment."""
    world = ab_only
    slower = world.commit("fork", world.base, "8x the work", UNITS="16")
    removed = world.pull_request("unlabeled", slower, fork=True, label=ACCEPT)
    finished: list[WorkflowRun] = []

    def maintainer_withdraws(workflow: str, job: str) -> None:
        if workflow == "benchmark.yml" and job == "report" and not finished:
            world.runner.before_job = None  # the unlabeled run runs undisturbed
            finished.append(world.on_pr(removed))  # the label goes; its run ends first
            world.runner.before_job = maintainer_withdraws

    world.runner.before_job = maintainer_withdraws
    accepting = world.on_pr(
        world.pull_request("labeled", slower, fork=True, label=ACCEPT, labels=(ACCEPT,))
    )
    world.runner.before_job = None
    assert finished
    assert finished[0].concurrency_group != accepting.concurrency_group
    assert accepting.result("report") == "success", failures(accepting)  # planned accepted
    body = world.the_comment()
    keep(world, body)
    assert f"Accepted by @{MAINTAINER}" not in body
    assert "ci-bench acceptance:" not in body
    assert f"The acceptance by @{MAINTAINER} was withdrawn" in verdict(world)
    assert world.headline().startswith("### ❌"), world.headline()
    # The run's check is the verdict it posted: red, not the report job's green.
    assert accepting.result("comment") == "failure", failures(accepting)
    log = accepting.job("comment")[0].step("Post the sticky comment").output
    assert "the acceptance was withdrawn while this ran" in log


def test_a_failed_role_lookup_keeps_githubs_transport_error_out_of_the_comment(world):
    head = world.commit("feature", world.base, "notes", NOTES="one\n")
    world.server.fail_next("GET", r"/collaborators/[^/]+/permission$", 502, times=50)
    run = world.on_pr(world.pull_request("labeled", head, label=ACCEPT, labels=(ACCEPT,)))
    assert run.result("comment") == "success", failures(run)
    assert report_of(run)["acceptance"] is None
    body = world.the_comment()
    keep(world, body)
    for transport in ("RetryError", "HTTPConnectionPool", "127.0.0.1", "Max retries"):
        assert transport not in body, transport
    # The status code as a word: a measured time of 0.4502 ms in the table is not it.
    assert not re.search(r"(?<![\d.])502(?!\d)", body), body
    said = verdict(world)
    assert f"@{ZWJ}{MAINTAINER}'s role could not be read from GitHub" in said
    assert "re-run this workflow once GitHub answers" in said
    assert "A maintainer other than the author" not in body  # not the advice for this
    plan_log = run.job("plan")[0].step("Plan").output
    assert "reading the role of @" in plan_log  # GitHub's answer, where a maintainer looks


@pytest.mark.parametrize(
    ("role", "legacy", "accepted", "said"),
    [
        ("maintain", None, True, ""),  # the legacy field reads maintain as write
        ("triage", None, False, "has the triage role here"),  # and triage as read
        ("release-manager", "write", True, ""),  # a custom role based on write
    ],
)
def test_the_labellers_role_decides_as_github_names_it(world, role, legacy, accepted, said):
    world.server.set_permission(REPO, MAINTAINER, role, legacy)
    head = world.commit("feature", world.base, "notes", NOTES="one\n")
    run = world.on_pr(world.pull_request("labeled", head, label=ACCEPT, labels=(ACCEPT,)))
    assert run.result("comment") == "success", failures(run)
    acceptance = report_of(run)["acceptance"]
    body = world.the_comment()
    keep(world, body)
    if accepted:
        assert acceptance == {"label": ACCEPT, "by": MAINTAINER, "head_sha": head}
        assert f"Accepted by @{MAINTAINER}" in body
    else:
        assert acceptance is None
        assert said in verdict(world)
        assert "read permission" not in body
        assert "accepting needs the write, maintain or admin role" in verdict(world)
