"""What the runner reads from workflow files: triggers, ``uses:`` targets, matrix legs,
``needs`` order and the files a step writes (GITHUB_ENV, GITHUB_OUTPUT)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import workflow_files as wf
from tests.harness.workflow_expressions import ExpressionError

PUSH = {"on": {"push": {"branches": ["main", "release/*"]}}}
TAGS = {"on": {"push": {"tags": ["v*"]}}}
PR = {"on": {"pull_request_target": {"types": ["opened", "labeled"]}, "workflow_dispatch": None}}


@pytest.mark.parametrize(
    ("workflow", "event", "payload", "starts"),
    [
        (PUSH, "push", {"ref": "refs/heads/main"}, True),
        (PUSH, "push", {"ref": "refs/heads/release/1.0"}, True),
        (PUSH, "push", {"ref": "refs/heads/feature"}, False),
        (PUSH, "push", {"ref": "refs/tags/v1"}, False),  # no tags filter: no tag pushes
        (TAGS, "push", {"ref": "refs/tags/v1.2"}, True),
        (TAGS, "push", {"ref": "refs/tags/nightly"}, False),
        (TAGS, "push", {"ref": "refs/heads/main"}, False),  # only tags: no branch pushes
        (PR, "pull_request_target", {"action": "labeled"}, True),
        (PR, "pull_request_target", {"action": "closed"}, False),
        (PR, "workflow_dispatch", {}, True),
        (PR, "push", {"ref": "refs/heads/main"}, False),
        ({"on": "push"}, "push", {"ref": "refs/heads/any"}, True),
        ({"on": ["push", "release"]}, "release", {}, True),
    ],
)
def test_an_event_starts_the_workflows_githubs_filters_let_through(
    workflow, event, payload, starts
):
    assert wf.triggers(workflow, event, payload) is starts


def test_a_workflow_file_reads_with_its_on_key(tmp_path: Path):
    (tmp_path / "w.yml").write_text("name: w\non:\n  push:\njobs: {}\n")
    assert wf.load("w.yml", tmp_path) == {"name": "w", "on": {"push": None}, "jobs": {}}
    assert "workflow_call" in wf.load("ci-bench.yml")["on"]


def test_uses_of_ci_benchs_own_files_map_onto_this_checkout(tmp_path: Path):
    pinned = "ci-bench/ci-bench/.github/workflows/ci-bench.yml@v1.2.3"
    assert wf.load_called(pinned) == wf.load("ci-bench.yml")
    (tmp_path / "local.yml").write_text("on: workflow_call\njobs: {}\n")
    assert wf.load_called("./.github/workflows/local.yml", tmp_path)["on"] == "workflow_call"
    with pytest.raises(ExpressionError):
        wf.load_called("someone/else/.github/workflows/x.yml@main")
    assert (
        wf.composite_action("./.ci-bench/.github/actions/setup") == wf.GITHUB / "actions" / "setup"
    )
    assert wf.composite_action("ci-bench/ci-bench/.github/actions/setup@v1", tmp_path) == (
        tmp_path / "actions" / "setup"
    )
    assert wf.composite_action("actions/checkout@v4") is None
    assert wf.WORKFLOWS == wf.GITHUB / "workflows"


def test_a_called_workflows_job_context_names_the_workflow_files_commit():
    local = wf.called_job_context("./.github/workflows/ci-bench.yml", "o/r", "abc")
    assert local == {
        "workflow_repository": "o/r",
        "workflow_sha": "abc",
        "workflow_ref": "o/r/.github/workflows/ci-bench.yml@abc",
    }
    pinned = wf.called_job_context("ci-bench/ci-bench/.github/workflows/x.yml@v9", "o/r", "abc")
    assert pinned["workflow_repository"] == "ci-bench/ci-bench"
    assert pinned["workflow_sha"] == "v9"


def test_env_and_output_files_read_single_and_multiline_values(tmp_path: Path):
    path = tmp_path / "env"
    path.write_text("A=1\nB=x=y\nTEXT<<EOF\nline one\nline two\nEOF\nnot a pair\nC=\n")
    assert wf.env_file(path) == {"A": "1", "B": "x=y", "TEXT": "line one\nline two", "C": ""}


def test_a_matrix_expands_into_legs_expressions_first():
    context = {"needs": {"plan": {"outputs": {"shards": "[1, 2]"}}}}
    spec = {"shard": "${{ fromJSON(needs.plan.outputs.shards) }}", "os": ["a", "b"]}
    assert wf.matrix_legs(spec, context) == [
        {"shard": 1, "os": "a"},
        {"shard": 1, "os": "b"},
        {"shard": 2, "os": "a"},
        {"shard": 2, "os": "b"},
    ]
    assert wf.matrix_legs(None, context) == [{}]


def test_jobs_run_after_what_they_need_in_file_order_otherwise():
    jobs = {"report": {"needs": ["measure", "plan"]}, "measure": {"needs": "plan"}, "plan": {}}
    assert [name for name, _ in wf.ordered(jobs)] == ["plan", "measure", "report"]
    assert wf.needs_of(jobs["measure"]) == ["plan"]
    with pytest.raises(ExpressionError, match="circular"):
        wf.ordered({"a": {"needs": "b"}, "b": {"needs": "a"}})
