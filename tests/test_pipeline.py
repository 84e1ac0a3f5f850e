"""The deployed pipeline end to end: the workflows' own steps, as GitHub would run them.

``tests/workflow_runner.py`` reads ``.github/workflows/*.yml`` and runs the ``run:`` steps
of the jobs an event starts, in ``needs`` order, in clones of a real git repository, with
the Actions environment, artifacts as folders and the local fake GitHub (traffic checked
against GitHub's OpenAPI description). Events are GitHub's webhook examples
(tests/fixtures/events), with their commit shas pointed at this test's repository; a fork
and the ``benchmark`` label are derived from them in memory, as noted where it happens.

The project measured is one tiny matmul shape in two dtypes (two cases, one per shard),
three repeats, so the whole pipeline runs in a couple of minutes on a small CPU.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.github_server import FakeGitHub
from tests.workflow_runner import Runner, WorkflowRun, load

ROOT = Path(__file__).resolve().parents[1]
EVENTS = Path(__file__).parent / "fixtures" / "events"
REPO = "Codertocat/Hello-World"  # the repository the webhook examples come from
FORK = "someone-else/Hello-World"
TOKEN = "ghs_pipeline_token"
NUMBER = 2  # the examples' pull request number
PYPROJECT = """\
[tool.ci-bench]
kernels = ["tiny_matmul"]
warmup = 1
repeats = 3
ab-repeats = 4

[tool.ci-bench.github]
retries = 2
backoff = 0.01
max-rate-limit-wait = 2
seconds-between-requests = 0
seconds-between-writes = 0
"""


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A git repository laid out like an adopter's: workflows, scripts, a tiny kernel.

    ``master`` (the examples' base branch) holds the project; ``feature`` adds two commits.
    """
    repo = tmp_path_factory.mktemp("origin")
    git(repo, "init", "-q", "-b", "master")
    git(repo, "config", "user.email", "ci@example.com")
    git(repo, "config", "user.name", "CI")
    for folder in (".github/workflows", "scripts", "constraints"):
        shutil.copytree(ROOT / folder, repo / folder)
    shutil.copy2(ROOT / "tests" / "fixtures" / "tiny_matmul.py", repo / "tiny_matmul.py")
    (repo / "pyproject.toml").write_text(PYPROJECT)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "ci-bench with one tiny kernel")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "feature")
    heads = []
    for n in (1, 2):
        (repo / "NOTES.md").write_text(f"change {n}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"change {n}")
        heads.append(git(repo, "rev-parse", "HEAD"))
    git(repo, "checkout", "-q", "master")
    git(repo, "tag", "v0.2.0", base)
    return {"path": repo, "base": base, "heads": heads}


@pytest.fixture
def server() -> Iterator[FakeGitHub]:
    login = "github-actions[bot]"
    with FakeGitHub(token=TOKEN, repos=(REPO,), login=login, default_branch="master") as fake:
        fake.add_issue(REPO, "An issue")
        fake.add_issue(REPO, "Update the README with new information.")  # number 2
        yield fake
        fake.assert_no_violations()


@pytest.fixture(scope="module")
def jax_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runners' JAX compilation cache: outside every workspace, shared across runs."""
    return tmp_path_factory.mktemp("tool-cache") / "ci-bench" / "jax"


@pytest.fixture
def runner(origin, server, jax_cache, tmp_path) -> Runner:
    return Runner(
        origin=origin["path"],
        root=tmp_path,
        api_url=server.url,
        repository=REPO,
        token=TOKEN,
        # What scripts/ci_venv.sh would write to GITHUB_ENV: this test's own environment.
        installed={"CI_BENCH_VENV": sys.prefix, "CI_BENCH_JAX_CACHE": str(jax_cache)},
        # The A/B job runs on pull requests by default; scenarios about the rest of the
        # pipeline opt out the way a repository can (test_with_the_ab_job... opts back in).
        variables={"CI_BENCH_PR_MODE": "baseline"},
    )


def event(name: str, **changes: Any) -> dict[str, Any]:
    """A webhook example with dotted-path changes, e.g. ``pull_request.head.sha``."""
    data = copy.deepcopy(json.loads((EVENTS / name).read_text(encoding="utf-8")))
    for dotted, value in changes.items():
        *parents, leaf = dotted.split(".")
        target = data
        for key in parents:
            target = target[key]
        target[leaf] = value
    return data


def pull_request(origin, name: str, head: str, **changes: Any) -> dict[str, Any]:
    """A pull-request example pointed at this repository's commits."""
    return event(
        name,
        **{
            "pull_request.head.sha": head,
            "pull_request.base.sha": origin["base"],
            "repository.full_name": REPO,
            **changes,
        },
    )


def as_fork(payload: dict[str, Any]) -> dict[str, Any]:
    """Derived, not from the package: the same pull request opened from a fork."""
    payload["pull_request"]["head"]["repo"]["full_name"] = FORK
    return payload


def with_label(payload: dict[str, Any], label: str) -> dict[str, Any]:
    """Derived: the labeled example with the maintainers' ``benchmark`` label."""
    payload["label"]["name"] = label
    return payload


def on_pr(runner: Runner, origin, payload: dict[str, Any]) -> WorkflowRun:
    runs = runner.dispatch("pull_request_target", payload, "refs/heads/master", origin["base"])
    assert [r.workflow for r in runs] == ["benchmark.yml"]
    return runs[0]


def comments(server: FakeGitHub) -> list[str]:
    return [c["body"] for c in server.repos[REPO.lower()].comments.values() if c["issue"] == NUMBER]


def report_of(run: WorkflowRun) -> dict[str, Any]:
    return json.loads((run.artifacts / "ci-bench-report" / "report.json").read_text())


def failures(run: WorkflowRun) -> str:
    """Every failed step's output, for assertion messages."""
    return "\n".join(
        f"--- {j.job} {j.matrix} / {s.name}\n{s.output[-3000:]}"
        for j in run.jobs
        for s in j.steps
        if s.outcome == "failure"
    )


def test_a_pull_request_is_measured_in_shards_reported_and_commented_once(
    runner, origin, server, jax_cache
):
    first, second = origin["heads"]
    # GitHub creates the comment and still answers 502: it must not be created twice.
    server.fail_next("POST", r"/issues/\d+/comments$", 502, after=True)
    run = on_pr(runner, origin, pull_request(origin, "pull_request_opened.json", first))

    assert run.ran == ["measure", "measure", "report", "comment", "lower"], failures(run)
    assert {j.result for j in run.jobs if j.job != "ab" and j.job != "profile"} == {"success"}, (
        failures(run)
    )
    assert run.concurrency_group == f"benchmark-{NUMBER}"
    for leg in run.job("measure"):
        # The labelled/pushed head, not the merge commit or the base branch.
        assert git(leg.workspace, "rev-parse", "HEAD") == first
        # The compilation cache lives outside the workspace (checkout's clean cannot drop it).
        assert not (leg.workspace / ".cache").exists()
    assert any(jax_cache.rglob("*")), "no compilation cache entries outside the workspace"
    report = report_of(run)
    assert sorted(c["id"] for c in report["cases"]) == [
        "matmul/B1-M128-K128-N128/bfloat16",
        "matmul/B1-M128-K128-N128/float32",
    ]
    assert report["meta"]["git"]["commit"] == first
    [summary] = [j.summary for j in run.job("report")]
    assert "matmul/B1-M128-K128-N128" in summary
    pr_json = json.loads((run.artifacts / "ci-bench-report" / "pr.json").read_text())
    assert pr_json["head_sha"] == first
    assert pr_json["run_url"].endswith(f"/actions/runs/{run.run_id}")

    [body] = comments(server)
    (runner.root / "comment.md").write_text(body)  # kept with the run, for a reader
    assert body.startswith("<!-- ci-bench sticky: benchmark|")
    assert f"https://github.com/{REPO}/actions/runs/{run.run_id}" in body
    assert f"`{first[:12]}`" in body
    assert TOKEN not in body

    # A second push: the same comment, edited, now about the new head.
    rerun = on_pr(runner, origin, pull_request(origin, "pull_request_synchronize.json", second))
    assert rerun.ran == ["measure", "measure", "report", "comment", "lower"], failures(rerun)
    [edited] = comments(server)
    assert f"`{second[:12]}`" in edited
    assert f"/actions/runs/{rerun.run_id}" in edited


def test_a_lost_shard_is_reported_unmeasured_and_the_comment_still_posts(runner, origin, server):
    runner.lose.add(("measure", json.dumps({"shard": 2})))
    run = on_pr(
        runner, origin, pull_request(origin, "pull_request_opened.json", origin["heads"][0])
    )

    assert run.result("measure") == "failure"
    assert run.result("report") in ("success", "failure"), failures(run)
    assert run.result("comment") == "success", failures(run)
    assert len(comments(server)) == 1
    report = report_of(run)
    verdicts = {c["id"]: c["verdict"] for c in report["cases"]}
    assert "matmul/B1-M128-K128-N128/float32" in verdicts
    # A lost shard's cases are `unmeasured` (in the run's matrix, never measured), which
    # fails the run by default: a lost shard never passes.
    assert verdicts["matmul/B1-M128-K128-N128/bfloat16"] == "unmeasured"
    assert report["exit_code"] != 0
    assert run.result("report") == "failure"


def test_with_the_ab_job_the_report_is_one_pr_verdict(runner, origin, server):
    runner.variables["CI_BENCH_PR_MODE"] = "both"
    run = on_pr(
        runner, origin, pull_request(origin, "pull_request_opened.json", origin["heads"][0])
    )

    assert sorted(run.ran) == ["ab", "comment", "lower", "measure", "measure", "report"], failures(
        run
    )
    assert run.result("report") == "success", failures(run)
    report = report_of(run)
    assert report["mode"] == "pr"  # the A/B decides, the baseline diff shows drift
    [body] = comments(server)  # one comment: the PR verdict, not a second A/B one
    (runner.root / "comment.md").write_text(body)  # kept with the run, for a reader
    assert "|pr -->" in body.splitlines()[0]
    assert "Δ vs base (A/B)¹" in body


def test_another_label_neither_starts_nor_cancels_a_run(runner, origin, server):
    payload = pull_request(origin, "pull_request_labeled.json", origin["heads"][0])
    assert payload["label"]["name"] == "bug"
    run = on_pr(runner, origin, payload)

    assert run.ran == []  # every job skipped: nothing red, nothing measured
    assert {j.result for j in run.jobs} == {"skipped"}
    # Its concurrency group is its own, so it cannot cancel the PR's measuring run.
    assert run.concurrency_group != f"benchmark-{NUMBER}"
    assert comments(server) == []


def test_a_fork_runs_only_on_the_label_and_only_the_labelled_commit(runner, origin, server):
    head = origin["heads"][1]
    pushed = as_fork(pull_request(origin, "pull_request_synchronize.json", head))
    unlabelled = on_pr(runner, origin, pushed)
    # Only the GitHub-hosted lowering check (read-only token); nothing on the TPU runners.
    assert unlabelled.ran == ["lower"], failures(unlabelled)
    assert unlabelled.concurrency_group != f"benchmark-{NUMBER}"
    assert comments(server) == []

    labelled = as_fork(
        with_label(pull_request(origin, "pull_request_labeled.json", head), "benchmark")
    )
    run = on_pr(runner, origin, labelled)
    assert run.ran == ["measure", "measure", "report", "comment"], failures(run)
    assert run.concurrency_group == f"benchmark-{NUMBER}"
    assert {git(leg.workspace, "rev-parse", "HEAD") for leg in run.job("measure")} == {head}
    [body] = comments(server)
    assert f"`{head[:12]}`" in body


def test_a_fork_cannot_edit_its_way_onto_the_tpu_runners():
    """Only default-branch YAML may start self-hosted jobs for pull requests."""
    for path in (ROOT / ".github" / "workflows").glob("*.yml"):
        workflow = load(path.name)
        on = workflow["on"]
        self_hosted = any(
            "self-hosted" in (job.get("runs-on") or []) for job in workflow["jobs"].values()
        )
        if self_hosted:
            assert "pull_request" not in on, f"{path.name}: PR-controlled YAML on TPU runners"
    benchmark = load("benchmark.yml")
    assert benchmark["permissions"] == {"contents": "read"}
    for name, job in benchmark["jobs"].items():
        writes = {k for k, v in (job.get("permissions") or {}).items() if v == "write"}
        if name != "comment":
            assert not writes, name
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout"):
                assert step["with"]["persist-credentials"] is False
    # The only job with a write token checks out the default branch (no `ref`): no PR code.
    comment = benchmark["jobs"]["comment"]
    assert comment["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert "ref" not in comment["steps"][0]["with"]


def test_a_dispatch_runs_the_chosen_inputs_and_comments_nowhere(runner, origin, server):
    inputs = {"kernels": "matmul", "profile": "smoke", "repeats": "2", "fail_on": "none"}
    payload = event("workflow_dispatch.json", inputs=inputs)
    payload["repository"]["full_name"] = REPO
    runs = runner.dispatch(
        "workflow_dispatch", payload, "refs/heads/master", origin["base"], "benchmark.yml"
    )
    assert [r.workflow for r in runs] == ["benchmark.yml"]
    [run] = runs
    assert run.ran == ["measure", "measure", "report"], failures(run)
    report = report_of(run)
    assert report["meta"]["profile"] == "smoke"
    assert report["meta"]["settings"]["repeats"] == 2
    assert comments(server) == []


def test_a_tag_promotes_once_and_its_rerun_changes_nothing(runner, origin, server):
    payload = event("push_tag.json", after=origin["base"])
    assert payload["ref"] == "refs/tags/v0.2.0"
    runs = runner.dispatch("push", payload, payload["ref"], origin["base"])
    assert [r.workflow for r in runs] == ["promote.yml"]
    assert runs[0].ran == ["promote"], failures(runs[0])
    assert runs[0].result("promote") == "success", failures(runs[0])
    files = server.files(REPO)
    [name] = [p for p in files if p.startswith("baselines/")]
    text = files[name].decode()
    entry = json.loads(text)["entries"][0]
    assert entry["provenance"]["tag"] == "v0.2.0"
    assert entry["device"]["hostname"] == ""
    assert entry["settings"]["compilation_cache"] is None
    assert str(runner.root) not in text
    commits = len(server.commits)

    again = runner.dispatch("push", payload, payload["ref"], origin["base"])
    assert again[0].result("promote") == "success", failures(again[0])
    assert "unchanged" in again[0].job("promote")[0].step("Measure and promote").output
    assert len(server.commits) == commits
    assert server.files(REPO) == files


def test_a_release_starts_nothing_since_its_tag_push_already_promoted(runner, origin):
    payload = event("release_published.json")
    assert runner.dispatch("release", payload, "refs/tags/0.0.1", origin["base"]) == []
