"""``ci-bench ci`` and ``comment`` end to end: real CLI, real PyGithub, a real HTTP server.

Events come from GitHub's webhook examples (tests/fixtures/events); every request the tool
sends is validated against GitHub's OpenAPI description by the fake server
(tests/harness/cli_ci.py).
This file: the pull request's sticky comment, forks, artifacts and failures.
"""

from __future__ import annotations

import json

from ci_bench.errors import ExitCode
from ci_bench.store.files import dump_model
from tests.conftest import run_cli
from tests.harness import cli_ci
from tests.harness.cli_ci import REPO, SMALL, assert_secret_kept, comments, gh, open_pull
from tests.harness.cli_ci_events import actions_env, event_file, pr_env
from tests.harness.factories import case, results

server, workspace = cli_ci.server, cli_ci.workspace


def test_a_pull_request_run_twice_keeps_one_comment_edited_in_place(server, workspace):
    number, head = open_pull(server)
    env = pr_env(server, workspace, number, head)
    first = run_cli("ci", *SMALL, cwd=workspace, env=env)
    assert first.returncode == 0, first.stderr
    assert "comment created" in first.stderr
    (only,) = comments(server, number)
    # ONE comment per (workflow, pull request), whatever the mode and device.
    assert only.body.startswith(f"<!-- ci-bench sticky: benchmark|pr {number} -->")
    assert "ci-bench:" in only.body
    second = run_cli("ci", *SMALL, cwd=workspace, env=env)
    assert second.returncode == 0, second.stderr
    assert "comment updated" in second.stderr
    after = comments(server, number)
    assert [c.id for c in after] == [only.id]
    assert after[0].body != only.body
    methods = [(r.method, r.path) for r in server.requests if "comments" in r.path]
    assert sum(m == "POST" for m, _ in methods) == 1
    assert sum(m == "PATCH" for m, _ in methods) == 1
    # the summary, outputs and artifact files were written too
    out = workspace / "ci-bench-out"
    assert {p.name for p in out.iterdir()} >= {
        "results.json",
        "report.json",
        "report.md",
        "pr.json",
    }
    assert "ci-bench:" in (workspace / "summary.md").read_text()
    outputs = (workspace / "output.txt").read_text()
    assert "verdict<<" in outputs
    assert "regressions<<" in outputs
    assert "report-path<<" in outputs
    assert_secret_kept(first.stdout, first.stderr, second.stdout, second.stderr, folder=workspace)


def test_the_sticky_comment_is_found_across_pages(server, workspace):
    number, head = open_pull(server)
    issue = gh(server).get_repo(REPO).get_issue(number)
    for i in range(130):
        issue.create_comment(f"chatter {i}")
    results_path = workspace / "r.json"
    results_path.write_text(dump_model(results([case("matmul/B1-M128-K128-N128/float32")])))
    env = pr_env(server, workspace, number, head)
    for _ in range(2):
        done = run_cli("ci", "--results", str(results_path), cwd=workspace, env=env)
        assert done.returncode == 0, done.stderr
    ours = [c for c in comments(server, number) if c.body.startswith("<!-- ci-bench sticky")]
    assert len(ours) == 1
    pages = [
        r.query.get("page")
        for r in server.requests
        if r.path.endswith("/comments") and r.method == "GET"
    ]
    assert any(p not in (None, "1", ["1"]) for p in pages)


def test_a_fork_leaves_the_comment_to_the_comment_job_never_to_a_relay(server, workspace):
    number, head = open_pull(server)
    env = pr_env(server, workspace, number, head, fork=True)
    done = run_cli("ci", *SMALL, cwd=workspace, env=env)
    assert done.returncode == 0, done.stderr
    assert "comment left to the comment job" in done.stderr
    assert comments(server, number) == []
    out = workspace / "ci-bench-out"
    run_url = f"https://github.com/{REPO}/actions/runs/4242"
    pr = {"number": number, "head_sha": head, "run_url": run_url}
    assert json.loads((out / "pr.json").read_text()) == pr
    # comment.yml: workflow_run completed; GitHub lists no pull requests for a fork's run
    run_event = event_file(
        workspace,
        "workflow_run_completed.json",
        workflow_run__event="pull_request",
        workflow_run__head_sha=head,
        workflow_run__name="benchmark",
        workflow_run__pull_requests=[],
    )
    env = actions_env(server, workspace, "workflow_run", run_event)
    posted = run_cli("comment", "--report-dir", str(out), cwd=workspace, env=env)
    # A workflow_run relay never renders a verdict from an artifact (issue 27): a fork's
    # run's files are its code's; the benchmark workflow's own comment job posts the verdict.
    assert posted.returncode == ExitCode.USAGE, posted.stderr
    assert "the relay writes only the lowering section" in posted.stderr
    assert comments(server, number) == []


def test_an_artifact_naming_another_pull_request_is_refused(server, workspace):
    number, head = open_pull(server)
    out = workspace / "ci-bench-out"
    env = pr_env(server, workspace, number, head, fork=True)
    assert run_cli("ci", *SMALL, cwd=workspace, env=env).returncode == 0
    run_event = event_file(
        workspace,
        "workflow_run_completed.json",
        workflow_run__event="pull_request",
        workflow_run__head_sha="f" * 40,
        workflow_run__pull_requests=[],
    )
    env = actions_env(server, workspace, "workflow_run", run_event)
    done = run_cli("comment", "--report-dir", str(out), cwd=workspace, env=env)
    assert done.returncode == ExitCode.USAGE
    assert "not commenting" in done.stderr
    assert comments(server, number) == []


def test_an_acceptance_claimed_by_the_artifact_is_refused_by_the_comment_job(server, workspace):
    """The report artifact comes from jobs that ran pull-request code: who accepted is
    this run's event's word (the plan), never the artifact's."""
    number, head = open_pull(server)
    out = workspace / "ci-bench-out"
    env = pr_env(server, workspace, number, head)
    done = run_cli("ci", *SMALL, "--no-comment", cwd=workspace, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "report.json").read_text())
    report["acceptance"] = {"label": "benchmark-accept", "by": "a-maintainer", "head_sha": head}
    (out / "report.json").write_text(json.dumps(report))
    done = run_cli("ci", "--role", "comment", "--report-dir", str(out), cwd=workspace, env=env)
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert "acceptance is not the one this run's event gave (no acceptance)" in done.stderr
    assert "Traceback" not in done.stderr
    assert comments(server, number) == []


def test_server_errors_are_retried(server, workspace):
    number, head = open_pull(server)
    server.fail_next("GET", r"/issues/\d+/comments$", 502)
    server.fail_next("POST", r"/issues/\d+/comments$", 503)
    done = run_cli("ci", *SMALL, cwd=workspace, env=pr_env(server, workspace, number, head))
    assert done.returncode == 0, done.stderr
    assert len(comments(server, number)) == 1


def test_a_failed_comment_keeps_the_report_and_says_which_step_failed(server, workspace):
    number, head = open_pull(server)
    server.fail_next("GET", r"/issues/\d+/comments$", 500, times=10)
    done = run_cli("ci", *SMALL, cwd=workspace, env=pr_env(server, workspace, number, head))
    assert done.returncode == ExitCode.GITHUB
    assert "GitHub API: updating the comment" in done.stderr
    assert "Traceback" not in done.stderr
    out = workspace / "ci-bench-out"
    assert json.loads((out / "report.json").read_text())["verdict"] == "new"
    assert "ci-bench:" in (workspace / "summary.md").read_text()
    assert_secret_kept(done.stdout, done.stderr, folder=workspace)


def test_a_huge_report_is_cut_to_fit_a_comment(server, workspace):
    number, head = open_pull(server)
    many = [case(f"matmul/B{b}-M{m}-K128-N128/float32") for b in range(1, 41) for m in range(1, 41)]
    path = workspace / "many.json"
    path.write_text(dump_model(results(many)))
    done = run_cli(
        "ci", "--results", str(path), cwd=workspace, env=pr_env(server, workspace, number, head)
    )
    assert done.returncode == 0, done.stderr
    (comment,) = comments(server, number)
    assert len(comment.body) <= 65_536
    assert (
        "did not fit here: see the job summary and the `ci-bench-report` artifact" in comment.body
    )
    assert "actions/runs/4242" in comment.body
    assert "All 1600 cases" in (workspace / "summary.md").read_text()


def test_a_pasted_marker_from_someone_else_is_not_our_comment(server, workspace):
    number, head = open_pull(server)
    results_path = workspace / "r.json"
    results_path.write_text(dump_model(results([case("matmul/B1-M128-K128-N128/float32")])))
    env = pr_env(server, workspace, number, head)
    assert run_cli("ci", "--results", str(results_path), cwd=workspace, env=env).returncode == 0
    (ours,) = comments(server, number)
    # The same marker in a comment by another account: edited? never.
    server.repos[REPO.lower()].comments[ours.id]["user"] = "mallory"
    done = run_cli("ci", "--results", str(results_path), cwd=workspace, env=env)
    assert done.returncode == 0, done.stderr
    assert "comment created" in done.stderr
    assert len(comments(server, number)) == 2
