"""``ci-bench record``, ``history`` and ``site`` through the real CLI; the data branch
through real PyGithub against the local GitHub server (OpenAPI-checked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_bench.errors import ExitCode
from ci_bench.store.files import dump_model
from ci_bench.store.history import append_local, device_file, parse_jsonl
from kernels.matmul import VERSION
from tests.conftest import run_cli, write_project
from tests.harness.factories import CPU, case, results
from tests.harness.github_server import FakeGitHub
from tests.harness.history_data import STEP_CASE, story

TOKEN = "ghs_history_token"
REPO = "octo-org/ci-bench"
FAST_API = """
[tool.ci-bench.github]
retries = 1
backoff = 0.01
seconds-between-requests = 0
seconds-between-writes = 0
"""
M128 = "matmul/B1-M128-K128-N128/float32"
DATA_FILE = f"history/{device_file(CPU.identity)}"


@pytest.fixture
def server():
    with FakeGitHub(token=TOKEN, repos=(REPO,)) as fake:
        yield fake
        fake.assert_no_violations()


@pytest.fixture
def workspace(tmp_path):
    write_project(tmp_path, ["kernels.matmul"], FAST_API)
    return tmp_path


def results_file(folder: Path, commit: str, name: str = "results.json") -> Path:
    path = folder / name
    path.write_text(dump_model(results([case(M128)], commit=commit)))
    return path


def env_for(server, folder: Path, message: str = "Faster tiles (#42)") -> dict[str, str]:
    event = folder / "push.json"
    event.write_text(json.dumps({"ref": "refs/heads/main", "head_commit": {"message": message}}))
    return {
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": server.url,
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_EVENT_PATH": str(event),
    }


def test_record_appends_to_the_data_branch_once_per_commit(server, workspace):
    path = results_file(workspace, "a" * 40)
    env = env_for(server, workspace)
    first = run_cli("record", str(path), "--remote", cwd=workspace, env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("written:")
    again = run_cli("record", str(path), "--remote", cwd=workspace, env=env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("unchanged:")
    commits_on_branch = [c for c in server.commits if c.branch == "ci-bench-data"]
    assert len(commits_on_branch) == 1
    assert "main" not in {c.branch for c in server.commits}  # the default branch is untouched
    (record,) = parse_jsonl(server.files(REPO, "ci-bench-data")[DATA_FILE].decode(), "remote")
    assert record.commit == "a" * 40
    assert record.pr == 42  # from the push's head commit message
    assert TOKEN not in first.stdout + first.stderr


def test_retention_on_the_data_branch_keeps_the_newest(server, workspace):
    env = env_for(server, workspace, message="no pull request here")
    for i, commit in enumerate(("b" * 40, "c" * 40, "d" * 40)):
        path = results_file(workspace, commit, f"r{i}.json")
        proc = run_cli("record", str(path), "--remote", "--keep", "2", cwd=workspace, env=env)
        assert proc.returncode == 0, proc.stderr
    records = parse_jsonl(server.files(REPO, "ci-bench-data")[DATA_FILE].decode(), "remote")
    assert [r.commit for r in records] == ["c" * 40, "d" * 40]
    assert all(r.pr is None for r in records)


def test_record_without_a_token_is_a_usage_error(workspace):
    path = results_file(workspace, "e" * 40)
    proc = run_cli("record", str(path), "--remote", cwd=workspace, env={"GITHUB_TOKEN": ""})
    assert proc.returncode == ExitCode.USAGE
    assert "GITHUB_TOKEN" in proc.stderr


def test_a_failing_api_is_exit_4_with_one_line(server, workspace):
    server.fail_next("PUT", "/contents/", 500, times=5)
    path = results_file(workspace, "f" * 40)
    proc = run_cli("record", str(path), "--remote", cwd=workspace, env=env_for(server, workspace))
    assert proc.returncode == ExitCode.GITHUB
    assert proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr


@pytest.fixture
def history(tmp_path) -> Path:
    folder = tmp_path / "history"
    for record in story().records:
        append_local(folder, record)
    return folder


def test_history_names_the_commit_of_the_step(history, tmp_path):
    proc = run_cli(
        "history", "--kernel", "matmul", "--history", str(history), "--no-baselines",
        "--repo-url", "https://github.com/octo-org/kernels", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    step = story().step_commit
    line = next(ln for ln in proc.stdout.splitlines() if ln.strip().startswith(STEP_CASE))
    assert step[:12] in line
    assert "slower" in line
    assert f"https://github.com/octo-org/kernels/commit/{step}" in proc.stdout
    as_json = run_cli(
        "history", "--history", str(history), "--no-baselines", "--format", "json", cwd=tmp_path
    )
    rows = json.loads(as_json.stdout)
    assert {(r["case"], r["commit"]) for r in rows} >= {(STEP_CASE, step)}


def test_history_of_an_unknown_kernel_is_a_usage_error(history, tmp_path):
    proc = run_cli(
        "history", "--kernel", "gla", "--history", str(history), "--no-baselines", cwd=tmp_path
    )
    assert proc.returncode == ExitCode.USAGE
    assert "no history for kernel gla" in proc.stderr


def test_site_writes_a_self_contained_page(history, tmp_path):
    out = tmp_path / "site"
    proc = run_cli(
        "site", "--out", str(out), "--history", str(history), "--no-baselines", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in out.iterdir()} == {
        "index.html", "data.js", "data.json", "app.js", "style.css",
    }  # fmt: skip
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in out.iterdir())  # servable
    page = (out / "index.html").read_text()
    assert "http" not in page.replace('"http://www.w3.org', "")  # nothing fetched from a CDN
    data = json.loads((out / "data.json").read_text())
    (group,) = data["groups"]
    assert len(group["commits"]) == len(story().records)
    assert [v["version"] for v in group["versions"]] == ["0.1.0", "0.2.0"]
    assert [r["version"] for r in group["roofline"]] == ["0.1.0", "0.2.0"]


def test_site_of_an_empty_history_still_writes_the_page_and_exits_3(tmp_path):
    (tmp_path / "empty").mkdir()
    out = tmp_path / "site"
    proc = run_cli(
        "site", "--out", str(out), "--history", str(tmp_path / "empty"), "--no-baselines",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == ExitCode.NOTHING_MEASURED
    assert json.loads((out / "data.json").read_text())["groups"] == []


def test_tuned_configs_beside_the_baselines_are_not_read_as_baselines(tmp_path):
    """Issue 54 D1: after ``tune --write`` put a tuned file into baselines/, ``site`` and
    ``history`` exited 2 ("entries: Field required"): the dashboard stopped building."""
    from tests.test_tune_release import _tuned

    write_project(tmp_path, ["kernels.matmul"])
    run = tmp_path / "r.json"
    run.write_text(dump_model(results([case(M128)], profile="ci")))
    promoted = run_cli("promote", str(run), "--tag", "v0.1.0", cwd=tmp_path)
    assert promoted.returncode == ExitCode.OK, promoted.stderr
    _tuned(tmp_path, {"block_m": 128, "block_k": 128, "block_n": 128})
    names = sorted(p.name for p in (tmp_path / "baselines").iterdir())
    assert names == ["matmul_v0.1.0.json", f"matmul_v{VERSION}.tuned.v5e.json"]

    shown = run_cli("history", cwd=tmp_path)
    assert shown.returncode == ExitCode.OK, shown.stderr
    assert "matmul on " in shown.stdout  # the baseline's record is read, the tuned file not
    site = run_cli("site", "--out", str(tmp_path / "site"), cwd=tmp_path)
    assert site.returncode == ExitCode.OK, site.stderr
    assert (tmp_path / "site" / "index.html").is_file()
