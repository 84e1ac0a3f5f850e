"""What the ``ci-bench ci`` and ``comment`` tests share: the fake GitHub, a git workspace,
and pull requests (tests/harness/cli_ci_events.py makes the Actions environment).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from github import Auth, Github

from tests.conftest import write_project
from tests.harness.github_server import FakeGitHub

TOKEN = "ghs_S3CRET_token_never_printed"
REPO = "octo-org/ci-bench"
# Baseline mode: these tests are about the comment and the files around it; the pull-request
# default (both: the A/B decides) is tested on its own (tests/test_cli_ci_measure.py).
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


def comments(server, number):
    return list(gh(server).get_repo(REPO).get_issue(number).get_comments())


def assert_secret_kept(*texts: str, folder: Path | None = None) -> None:
    for text in texts:
        assert TOKEN not in text
    for path in folder.rglob("*") if folder else []:
        if path.is_file():
            assert TOKEN not in path.read_text(errors="replace"), path


RELEASE = ["--repeats", "2", "--warmup", "0"]
