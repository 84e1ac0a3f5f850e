"""``ci-bench ci`` and ``comment`` end to end: real CLI, real PyGithub, a real HTTP server.

Events come from GitHub's webhook examples (tests/fixtures/events); every request the tool
sends is validated against GitHub's OpenAPI description by the fake server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from github import Auth, Github

from ci_bench.errors import ExitCode
from ci_bench.store.files import dump_model
from tests.conftest import run_cli, write_project
from tests.harness.factories import case, results
from tests.harness.github_server import FakeGitHub

TOKEN = "ghs_S3CRET_token_never_printed"
REPO = "octo-org/ci-bench"
EVENTS = Path(__file__).parent / "fixtures" / "events"
# Baseline mode: these tests are about the comment and the files around it; the pull-request
# default (both: the A/B decides) is tested on its own below.
SMALL = ["--case", "matmul/B1-M128-K128-N128/*", "--repeats", "2", "--warmup", "0"]
SMALL += ["--mode", "baseline"]
FAST_API = """
[tool.ci-bench.github]
retries = 2
backoff = 0.01
max-rate-limit-wait = 2
seconds-between-requests = 0
seconds-between-writes = 0
comment-author = "ci-bench-bot"
"""


@pytest.fixture
def server():
    with FakeGitHub(token=TOKEN, repos=(REPO,)) as fake:
        yield fake
        fake.assert_no_violations()


def git_in(folder: Path, *args: str) -> str:
    import subprocess

    done = subprocess.run(
        ["git", "-C", str(folder), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def workspace(tmp_path):
    """A kernel library checked out as git would: a PR's base commit is HEAD here."""
    write_project(tmp_path, ["kernels.matmul"], FAST_API)
    git_in(tmp_path, "init", "-q", "-b", "main")
    commit_all(tmp_path, "base")
    return tmp_path


def commit_all(folder: Path, message: str) -> None:
    who = ("-c", "user.email=t@example.com", "-c", "user.name=t")
    git_in(folder, "add", ".")
    git_in(folder, *who, "commit", "-qm", message)


def gh(server) -> Github:
    return Github(
        auth=Auth.Token(TOKEN),
        base_url=server.url,
        seconds_between_requests=0,
        seconds_between_writes=0,
        retry=None,
    )


def open_pull(server, branch="feature") -> tuple[int, str]:
    repo = gh(server).get_repo(REPO)
    head = repo.get_git_ref("heads/main").object.sha
    repo.create_git_ref(f"refs/heads/{branch}", head)
    pull = repo.create_pull(base="main", head=branch, title="Faster matmul", body="")
    return pull.number, pull.head.sha


def event_file(folder: Path, name: str, **changes) -> Path:
    data = json.loads((EVENTS / name).read_text())
    for dotted, value in changes.items():
        target = data
        *parents, leaf = dotted.split("__")
        for key in parents:
            target = target[key]
        target[leaf] = value
    path = folder / f"event-{name}"
    path.write_text(json.dumps(data))
    return path


def actions_env(server, folder: Path, event: str, event_path: Path, **extra) -> dict[str, str]:
    return {
        "GITHUB_EVENT_NAME": event,
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_SHA": "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
        "GITHUB_REF": "refs/pull/1/merge",
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_API_URL": server.url,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_RUN_ID": "4242",
        "GITHUB_WORKFLOW": "benchmark",
        "GITHUB_STEP_SUMMARY": str(folder / "summary.md"),
        "GITHUB_OUTPUT": str(folder / "output.txt"),
        **extra,
    }


def pr_env(server, folder, number, head_sha, fork=False):
    changes = {
        "pull_request__number": number,
        "pull_request__head__sha": head_sha,
        "pull_request__base__sha": git_in(folder, "rev-parse", "HEAD"),
    }
    if fork:
        changes["pull_request__head__repo"] = {"full_name": "someone/fork"}
    path = event_file(folder, "pull_request_synchronize.json", **changes)
    return actions_env(server, folder, "pull_request", path)


def comments(server, number):
    return list(gh(server).get_repo(REPO).get_issue(number).get_comments())


def assert_secret_kept(*texts: str, folder: Path | None = None) -> None:
    for text in texts:
        assert TOKEN not in text
    for path in folder.rglob("*") if folder else []:
        if path.is_file():
            assert TOKEN not in path.read_text(errors="replace"), path


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


def test_dispatch_runs_only_the_chosen_kernels_and_profile(server, workspace):
    write_project(workspace, ["kernels.matmul", "wrong_matmul"], FAST_API)
    path = event_file(
        workspace,
        "workflow_dispatch.json",
        inputs={"kernels": "matmul", "profile": "smoke", "repeats": "2", "fail_on": "none"},
    )
    env = actions_env(server, workspace, "workflow_dispatch", path)
    done = run_cli("ci", cwd=workspace, env=env)
    assert done.returncode == 0, done.stderr
    res = json.loads((workspace / "ci-bench-out" / "results.json").read_text())
    assert res["meta"]["profile"] == "smoke"
    assert res["meta"]["kernels"] == {"matmul": "0.1.0"}
    assert res["meta"]["settings"]["repeats"] == 2
    assert {c["kernel"] for c in res["cases"]} == {"matmul"}
    assert not [r for r in server.requests if r.method != "GET"]


def tag_env(server, folder, tag):
    """A tag push in a project whose 'full' profile is one small shape (tiny_matmul)."""
    write_project(folder, ["tiny_matmul"], FAST_API)
    path = event_file(folder, "push_tag.json", ref=f"refs/tags/{tag}")
    return actions_env(server, folder, "push", path, GITHUB_REF=f"refs/tags/{tag}")


RELEASE = ["--repeats", "2", "--warmup", "0"]


def test_a_tag_promotes_once_and_a_rerun_changes_nothing(server, workspace):
    env = tag_env(server, workspace, "matmul-v0.1.0")
    first = run_cli("ci", *RELEASE, cwd=workspace, env=env)
    assert first.returncode == 0, first.stderr
    files = server.files(REPO)
    doc = json.loads(files["baselines/matmul_v0.1.0.json"])
    assert doc["entries"][0]["provenance"]["tag"] == "matmul-v0.1.0"
    assert len(server.commits) == 1
    assert "matmul-v0.1.0" in server.commits[0].message
    assert "cpu:cpu:" in server.commits[0].message
    again = run_cli("ci", *RELEASE, cwd=workspace, env=env)
    assert again.returncode == 0, again.stderr
    assert "unchanged" in again.stdout
    assert len(server.commits) == 1
    assert server.files(REPO) == files


def test_a_concurrent_change_is_merged_not_overwritten(server, workspace):
    other = results([case("matmul/B1-M128-K128-N128/float32")])
    other = other.model_copy(
        update={
            "meta": other.meta.model_copy(
                update={
                    "device": other.meta.device.model_copy(
                        update={"device_kind": "TPU v6 lite", "platform": "tpu"}
                    )
                }
            )
        }
    )
    from ci_bench.store.baseline_text import render_baseline
    from ci_bench.store.baselines import BaselineFile, entry_from_results

    entry = entry_from_results(other, "matmul", other.meta.started_at, "v0.0.9")
    remote = render_baseline(BaselineFile(kernel="matmul", version="0.1.0", entries=[entry]))
    repo = gh(server).get_repo(REPO)
    repo.create_file("baselines/matmul_v0.1.0.json", "v6e numbers", remote, branch="main")
    server.fail_next("PUT", r"/contents/baselines/matmul_v0\.1\.0\.json$", 409)
    done = run_cli("ci", *RELEASE, cwd=workspace, env=tag_env(server, workspace, "v0.1.0"))
    assert done.returncode == 0, done.stderr
    doc = json.loads(server.files(REPO)["baselines/matmul_v0.1.0.json"])
    kinds = [e["device"]["device_kind"] for e in doc["entries"]]
    assert kinds == ["TPU v6 lite", "cpu"]


def test_promotion_through_a_pull_request(server, workspace):
    env = tag_env(server, workspace, "v0.1.0")
    done = run_cli("ci", *RELEASE, "--promote-via", "pull-request", cwd=workspace, env=env)
    assert done.returncode == 0, done.stderr
    assert "pull request:" in done.stdout
    assert "baselines/matmul_v0.1.0.json" in server.files(REPO, "ci-bench/baselines-v0.1.0")
    assert "baselines/matmul_v0.1.0.json" not in server.files(REPO)
    again = run_cli("ci", *RELEASE, "--promote-via", "pull-request", cwd=workspace, env=env)
    assert again.returncode == 0, again.stderr
    pulls = [r for r in server.requests if r.method == "POST" and r.path.endswith("/pulls")]
    assert len(pulls) == 1


def test_a_kernel_tag_must_match_the_kernel_version(server, workspace):
    done = run_cli("ci", *RELEASE, cwd=workspace, env=tag_env(server, workspace, "matmul-v9.9.9"))
    assert done.returncode == ExitCode.USAGE
    assert "declares version 0.1.0, not 9.9.9" in done.stderr
    assert server.commits == []


def test_a_flagged_regression_is_re_measured_before_the_verdict(server, workspace):
    from ci_bench.measure.devices import fingerprint

    # A stored baseline a million times faster than anything this machine can do.
    fast = results(
        [case("matmul/B1-M128-K128-N128/float32", 1e-6, spread=0.0)], device=fingerprint()
    )
    path = workspace / "fast.json"
    path.write_text(dump_model(fast))
    assert (
        run_cli(
            "promote", str(path), "--baselines-dir", str(workspace / "baselines"), cwd=workspace
        ).returncode
        == 0
    )
    commit_all(workspace, "baselines on the base branch")
    number, head = open_pull(server)
    done = run_cli("ci", *SMALL, cwd=workspace, env=pr_env(server, workspace, number, head))
    assert done.returncode == ExitCode.FAILED, done.stderr
    assert "re-measuring matmul/B1-M128-K128-N128/float32" in done.stderr
    out = workspace / "ci-bench-out"
    res = json.loads((out / "results.json").read_text())
    flagged = next(c for c in res["cases"] if c["id"].endswith("float32"))
    assert flagged["confirmation"]["samples_ms"]
    report = json.loads((out / "report.json").read_text())
    verdict = next(c for c in report["cases"] if c["id"].endswith("float32"))
    assert verdict["verdict"] == "regression"
    assert verdict["confirmed"] is True


def test_both_modes_post_one_pull_request_verdict(server, workspace):
    import subprocess

    def git(*args):
        return subprocess.run(
            ["git", "-C", str(workspace), *args], check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    (workspace / "toy.py").write_text(
        "import dataclasses\nfrom kernels.matmul import SPEC as M\n"
        "SPEC = dataclasses.replace(M, name='toy', version='0.1.0')\n"
    )
    write_project(workspace, ["toy"], FAST_API)
    git("add", ".")
    git("commit", "-q", "-m", "base")
    base_sha = git("rev-parse", "HEAD")
    (workspace / "notes.txt").write_text("head\n")
    git("add", ".")
    git("commit", "-q", "-m", "head")
    number, head = open_pull(server)
    path = event_file(
        workspace,
        "pull_request_synchronize.json",
        pull_request__number=number,
        pull_request__head__sha=head,
        pull_request__base__sha=base_sha,
    )
    env = actions_env(server, workspace, "pull_request", path)
    args = ["--case", "toy/B1-M128-K128-N128/*", "--repeats", "3", "--warmup", "0"]
    for _ in range(2):
        done = run_cli("ci", "--mode", "both", *args, cwd=workspace, env=env)
        assert done.returncode in (ExitCode.OK, ExitCode.FAILED), done.stderr
    # ONE comment, edited on the second run: the A/B decides, the baseline diff shows drift.
    bodies = [c.body.splitlines()[0] for c in comments(server, number)]
    assert len(bodies) == 1
    assert bodies[0] == f"<!-- ci-bench sticky: benchmark|pr {number} -->"
    out = workspace / "ci-bench-out"
    pr = json.loads((out / "report.json").read_text())
    assert pr["mode"] == "pr"
    # The base branch has not moved: the merge base is the PR's base commit.
    assert pr["base_ref"] == f"merge base {base_sha[:12]}"
    assert all(c["ratio"] is not None for c in pr["cases"] if c["verdict"] != "error")
    assert "verdict<<" in (workspace / "output.txt").read_text()


def test_a_shard_job_writes_files_only(server, workspace):
    number, head = open_pull(server)
    env = pr_env(server, workspace, number, head)
    done = run_cli(
        "ci",
        *SMALL,
        "--shard",
        "1/2",
        "--no-publish",
        "--out-dir",
        "shard-1",
        cwd=workspace,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    out = workspace / "shard-1"
    assert {"results.json", "report.json", "report.md"} <= {p.name for p in out.iterdir()}
    assert json.loads((out / "results.json").read_text())["meta"]["shard"] == "1/2"
    assert not (workspace / "summary.md").exists()
    assert not (workspace / "output.txt").exists()
    assert "::" not in done.stdout
    assert comments(server, number) == []
    # the runner restarts mid-shard: the re-run attempt resumes and measures only the rest
    first = json.loads((out / "results.json").read_text())
    kept = first["cases"][0]
    cut = {**first, "meta": {**first["meta"], "complete": False}, "cases": [kept]}
    (workspace / "cut.json").write_text(json.dumps(cut))
    again = run_cli(
        "ci",
        *SMALL,
        "--shard",
        "1/2",
        "--no-publish",
        "--out-dir",
        "shard-1",
        "--resume",
        "cut.json",
        cwd=workspace,
        env=env,
    )
    assert again.returncode == 0, again.stderr
    assert "resuming cut.json: 1 case(s) already measured" in again.stderr
    resumed = json.loads((out / "results.json").read_text())
    assert resumed["cases"][0] == kept
    assert [c["id"] for c in resumed["cases"]] == [c["id"] for c in first["cases"]]


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


def test_a_library_tag_keeps_numbers_of_kernel_versions_it_did_not_bump(server, workspace):
    first = run_cli("ci", *RELEASE, cwd=workspace, env=tag_env(server, workspace, "v0.1.0"))
    assert first.returncode == 0, first.stderr
    files = server.files(REPO)
    second = run_cli("ci", *RELEASE, cwd=workspace, env=tag_env(server, workspace, "v0.2.0"))
    assert second.returncode == 0, second.stderr
    assert "unchanged: baselines/matmul_v0.1.0.json" in second.stdout
    assert len(server.commits) == 1
    assert server.files(REPO) == files


def test_a_pull_request_is_compared_with_its_base_commits_baselines(server, workspace):
    """A PR that edits baselines/ (here: a fake, impossibly fast entry) cannot move its own
    goalposts: the comparison reads the folder as it is at the PR's base commit."""
    number, head = open_pull(server)
    env = pr_env(server, workspace, number, head)  # base = the commit without baselines
    six = ["--case", "matmul/B1-M128-K128-N128/*", "--repeats", "6", "--warmup", "0"]
    six += ["--mode", "baseline"]
    first = run_cli("ci", *six, "--no-comment", cwd=workspace, env=env)
    assert first.returncode == 0, first.stderr
    out = workspace / "ci-bench-out"
    fake = json.loads((out / "results.json").read_text())
    for c in fake["cases"]:
        c["pallas"]["samples_ms"] = [1e-6] * len(c["pallas"]["samples_ms"])
        for key in ("mean_ms", "min_ms", "max_ms", "median_ms"):
            c["pallas"][key] = 1e-6
        c["pallas"]["std_ms"] = 0.0
        c["tflops"] = 1e6
    fake["meta"]["case_globs"] = []  # promotable: pretend it was the whole matrix
    fake["meta"]["matrix"] = [c["id"] for c in fake["cases"]]
    (workspace / "fake.json").write_text(json.dumps(fake))
    promoted = run_cli(
        "promote", "fake.json", "--baselines-dir", "baselines", "--tag", "v0.1.0", cwd=workspace
    )
    assert promoted.returncode == 0, promoted.stderr
    second = run_cli("ci", *six, "--no-comment", cwd=workspace, env=env)
    assert second.returncode == 0, second.stderr
    report = json.loads((out / "report.json").read_text())
    assert {c["verdict"] for c in report["cases"]} == {"new"}
    # The same files from the working tree would have failed the PR:
    own = run_cli("ci", *six, "--no-comment", "--baselines-ref", "", cwd=workspace, env=env)
    own_report = json.loads((out / "report.json").read_text())
    assert {c["verdict"] for c in own_report["cases"]} == {"regression"}, own.stderr
    assert own.returncode == ExitCode.FAILED
