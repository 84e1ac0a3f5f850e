"""``ci-bench ci`` and ``comment`` end to end: real CLI, real PyGithub, a real HTTP server.

Events come from GitHub's webhook examples (tests/fixtures/events); every request the tool
sends is validated against GitHub's OpenAPI description by the fake server
(tests/harness/cli_ci.py).
This file: what is measured and compared with what (dispatch, re-measure, modes, shards).
"""

from __future__ import annotations

import json

from ci_bench.errors import ExitCode
from ci_bench.store.files import dump_model
from kernels.matmul import VERSION
from tests.conftest import run_cli, write_project
from tests.harness import cli_ci
from tests.harness.cli_ci import FAST_API, SMALL, comments, commit_all, open_pull
from tests.harness.cli_ci_events import actions_env, event_file, pr_env
from tests.harness.factories import case, results

server, workspace = cli_ci.server, cli_ci.workspace


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
    assert res["meta"]["kernels"] == {"matmul": VERSION}
    assert res["meta"]["settings"]["repeats"] == 2
    assert {c["kernel"] for c in res["cases"]} == {"matmul"}
    assert not [r for r in server.requests if r.method != "GET"]


FLAGGED = "matmul/B1-M128-K128-N128/float32"


def _ci_against_a_stored_baseline(server, workspace, baseline_ms: float) -> tuple[int, dict]:
    """``ci-bench ci`` on a pull request whose base branch stores a baseline of
    ``baseline_ms`` for FLAGGED: its exit code and FLAGGED's verdict, once checked that
    the case was re-measured and both measurements kept."""
    from ci_bench.measure.devices import fingerprint

    stored = results([case(FLAGGED, baseline_ms, spread=0.0)], device=fingerprint())
    path = workspace / "stored.json"
    path.write_text(dump_model(stored))
    promote = ("promote", str(path), "--baselines-dir", str(workspace / "baselines"))
    assert run_cli(*promote, cwd=workspace).returncode == 0
    commit_all(workspace, "baselines on the base branch")
    number, head = open_pull(server)
    done = run_cli("ci", *SMALL, cwd=workspace, env=pr_env(server, workspace, number, head))
    assert f"re-measuring {FLAGGED}" in done.stderr, done.stderr
    out = workspace / "ci-bench-out"
    res = json.loads((out / "results.json").read_text())
    assert next(c for c in res["cases"] if c["id"] == FLAGGED)["confirmation"]["samples_ms"]
    report = json.loads((out / "report.json").read_text())
    return done.returncode, next(c for c in report["cases"] if c["id"] == FLAGGED)


def test_a_flagged_regression_is_re_measured_before_the_verdict(server, workspace):
    # A stored baseline a million times faster than anything this machine can do.
    code, verdict = _ci_against_a_stored_baseline(server, workspace, 1e-6)
    assert code == ExitCode.FAILED
    assert verdict["verdict"] == "regression"
    assert verdict["confirmed"] is True


def test_a_flagged_improvement_is_re_measured_before_the_verdict(server, workspace):
    """The mirror of the above: a speed-up is claimed in the comment only once it held."""
    code, verdict = _ci_against_a_stored_baseline(server, workspace, 1e6)
    assert code == ExitCode.OK
    assert verdict["verdict"] == "improved"
    assert verdict["confirmed"] is True
    assert "confirmed on re-measurement" in verdict["reason"]


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
