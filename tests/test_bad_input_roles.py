"""A role named by hand for an event it does not serve, or without the token its last step
needs, is refused before anything is measured (issue 31's "role under the wrong event").

``ci --role record`` under a pull request measured the matrix and then, given a token,
would have written the pull request's commit into the default branch's history; without
one it measured for nothing and failed after. The same for a release job with no token.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, write_project
from tests.harness.inproc import assert_one_line_error, call


def _env(folder: Path, name: str, fixture: str, github_ref: str) -> dict[str, str]:
    event = json.loads((FIXTURES / "events" / fixture).read_text())
    if name == "push":
        event["ref"] = github_ref
    (folder / "event.json").write_text(json.dumps(event))
    return {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": name,
        "GITHUB_EVENT_PATH": str(folder / "event.json"),
        "GITHUB_REPOSITORY": "octo/kernels",
        "GITHUB_SHA": "a" * 40,
        "GITHUB_REF": github_ref,
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_project(tmp_path, ["kernels.matmul"])
    return tmp_path


EVENTS = {
    "pull request": ("pull_request", "pull_request_synchronize.json", "refs/pull/1/merge"),
    "tag push": ("push", "push_tag.json", "refs/tags/v0.2.0"),
    "dispatch": ("workflow_dispatch", "workflow_dispatch.json", "refs/heads/main"),
}


@pytest.mark.parametrize("what", sorted(EVENTS))
def test_record_role_outside_a_branch_push_measures_nothing(project, what):
    env = {**_env(project, *EVENTS[what]), "GITHUB_TOKEN": "t"}
    done = call("ci", "--role", "record", "--out-dir", "out", cwd=project, env=env)
    assert_one_line_error(done, "--role record", "push to the default branch")
    assert not (project / "out" / "results.json").exists()  # refused before measuring


def test_record_role_without_a_token_measures_nothing(project):
    env = _env(project, "push", "push_tag.json", "refs/heads/main")
    done = call("ci", "--role", "record", "--out-dir", "out", cwd=project, env=env)
    assert_one_line_error(done, "GITHUB_TOKEN is not set")
    assert not (project / "out" / "results.json").exists()


def test_promote_role_without_a_token_measures_nothing(project):
    env = _env(project, "push", "push_tag.json", "refs/tags/v0.1.0")
    done = call("ci", "--role", "promote", "--out-dir", "out", cwd=project, env=env)
    assert_one_line_error(done, "GITHUB_TOKEN is not set")
    assert not (project / "out" / "results.json").exists()


@pytest.mark.parametrize("role", ["ab", "shard", "lower"])
def test_an_ab_report_a_role_never_reads_must_exist(project, role):
    """Found by the long fuzz run once every role was drawn: ``ci --role ab --ab-report
    missing.json`` measured and exited 0. Only the report job (and the single job) read an
    A/B report; the report job says in its report when the A/B job left none."""
    done = call(
        "ci", "--role", role, "--ab-report", "missing.json", "--out-dir", "out", cwd=project
    )
    assert_one_line_error(done, "missing.json: A/B report not found (--ab-report)")
    assert not (project / "out").exists()
