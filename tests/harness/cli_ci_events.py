"""GitHub's webhook examples made into an Actions environment for ``ci-bench ci`` and
``comment`` (tests/harness/cli_ci.py has the fake GitHub and the git workspace)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import write_project
from tests.harness.cli_ci import FAST_API, REPO, TOKEN, git_in

EVENTS = Path(__file__).parents[1] / "fixtures" / "events"


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


def tag_env(server, folder, tag):
    """A tag push in a project whose 'full' profile is one small shape (tiny_matmul)."""
    write_project(folder, ["tiny_matmul"], FAST_API)
    path = event_file(folder, "push_tag.json", ref=f"refs/tags/{tag}")
    return actions_env(server, folder, "push", path, GITHUB_REF=f"refs/tags/{tag}")
