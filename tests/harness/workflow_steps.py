"""What a workflow step does, decided from its ``uses:`` action or its ``run:`` command,
never from its ``name:`` (renaming a step must not change what a test runs), and the
emulation of the few actions the workflows use.

Kinds: ``install`` (ci-bench's setup action, or a ``run:`` that pip-installs: the test's
own environment stands in for it unless the runner runs installs for real), ``composite``
(another of ci-bench's own composite actions: its steps run), ``action`` (an action
emulated here: checkout, upload/download-artifact, pages) and ``script`` (a ``run:``).
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tests.harness.workflow_expressions import ExpressionError
from tests.harness.workflow_files import CI_BENCH_REPOSITORY, composite_action

INSTALL, COMPOSITE, ACTION, SCRIPT = "install", "composite", "action", "script"
# ci-bench's composite action that builds the venv (``.github/actions/setup``).
SETUP_ACTION = "setup"
_PIP_INSTALL = re.compile(r"\bpip3?\s+install\b")


def kind_of(step: Mapping[str, Any], own: Path) -> str:
    """What ``step`` does, from its ``uses:`` or its ``run:`` (``own``: ci-bench's
    ``.github``, where its composite actions live)."""
    uses = step.get("uses")
    if uses is not None:
        folder = composite_action(str(uses), own)
        if folder is None:
            return ACTION
        return INSTALL if folder.name == SETUP_ACTION else COMPOSITE
    return INSTALL if _PIP_INSTALL.search(str(step.get("run", ""))) else SCRIPT


def label_of(step: Mapping[str, Any]) -> str:
    """How a step is reported (``StepResult.name``): its name, else what it uses or runs."""
    return str(step.get("name") or step.get("uses") or step.get("run", ""))


class Host(Protocol):
    """What the emulated actions reach beyond the job: the runner's repository and runs."""

    origin: Path
    repository: str
    own: Path
    runs: Mapping[int, Any]  # run id -> a finished run (its ``artifacts`` folder)
    foreign_checkouts: list[tuple[str, str, str]]


@dataclass(frozen=True)
class Call:
    """One ``uses:`` step: its ``with:`` (interpolated) and where it runs."""

    with_: dict[str, str]
    workspace: Path
    artifacts: Path
    sha: str  # the run's GITHUB_SHA: checkout's default ref


def run_action(host: Host, action: str, call: Call) -> str:
    """An emulated action's outcome (success or failure); an unknown one raises."""
    emulate = ACTIONS.get(action.split("@")[0])
    if emulate is None:
        raise ExpressionError(f"no emulation for the action {action}")
    return emulate(host, call)


def checkout(host: Host, call: Call) -> str:
    """This repository cloned at the ref (the run's commit by default); ci-bench itself
    (``repository: ci-bench/ci-bench``) as this checkout's ``.github``."""
    repository = call.with_.get("repository", host.repository)
    if repository not in (host.repository, ""):
        return _checkout_ci_bench(host, call)
    ref = call.with_.get("ref") or call.sha
    depth = [] if call.with_.get("fetch-depth") == "0" else ["--depth", "1"]
    target = call.workspace / call.with_["path"] if call.with_.get("path") else call.workspace
    commands = [
        ["git", "clone", "-q", *depth, "--no-local", f"file://{host.origin}", str(target)],
        ["git", "-C", str(target), "fetch", "-q", "origin", ref],
        ["git", "-C", str(target), "checkout", "-q", "--detach", "FETCH_HEAD"],
    ]
    for command in commands:
        if subprocess.run(command, capture_output=True, check=False).returncode:
            return "failure"  # e.g. a branch that does not exist (yet)
    return "success"


def _checkout_ci_bench(host: Host, call: Call) -> str:
    if call.with_["repository"] != CI_BENCH_REPOSITORY:
        return "failure"  # no emulation of any other repository
    # ci-bench itself at the pinned ref: this checkout's .github (its actions).
    target = call.workspace / call.with_.get("path", ".")
    target.mkdir(parents=True, exist_ok=True)
    (target / ".github").symlink_to(host.own, target_is_directory=True)
    host.foreign_checkouts.append(
        (call.with_["repository"], call.with_.get("ref", ""), str(target))
    )
    return "success"


def upload_artifact(host: Host, call: Call) -> str:
    """The path (a folder or a file) copied into the run's artifact ``name``."""
    source = call.workspace / call.with_["path"]
    if not source.exists():
        return "success" if call.with_.get("if-no-files-found") in ("ignore", "warn") else "failure"
    target = call.artifacts / call.with_["name"]
    target.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True)
    else:
        shutil.copy2(source, target / source.name)
    return "success"


def upload_pages_artifact(host: Host, call: Call) -> str:
    """The site folder as the ``github-pages`` artifact."""
    with_ = {"name": "github-pages", "path": call.with_.get("path", "_site")}
    return upload_artifact(host, Call(with_, call.workspace, call.artifacts, call.sha))


def deploy_pages(host: Host, call: Call) -> str:
    return "success" if (call.artifacts / "github-pages").is_dir() else "failure"


def download_artifact(host: Host, call: Call) -> str:
    """Artifacts by name or pattern, this run's or (``run-id``, with a token) another's; a
    named artifact that does not exist fails the step, as on GitHub."""
    with_, artifacts = call.with_, call.artifacts
    if with_.get("run-id"):  # another run's artifacts (needs a token, as on GitHub)
        other = host.runs.get(int(with_["run-id"]))
        if other is None or not with_.get("github-token"):
            return "failure"
        artifacts = other.artifacts
    pattern = with_.get("pattern") or with_.get("name") or "*"
    target = call.workspace / with_.get("path", ".")
    merge = with_.get("merge-multiple") == "true" or "name" in with_
    found = [f for f in sorted(artifacts.iterdir()) if fnmatch.fnmatchcase(f.name, pattern)]
    for folder in found:
        shutil.copytree(folder, target if merge else target / folder.name, dirs_exist_ok=True)
    return "failure" if "name" in with_ and not found else "success"


ACTIONS: dict[str, Callable[[Host, Call], str]] = {
    "actions/checkout": checkout,
    "actions/upload-artifact": upload_artifact,
    "actions/upload-pages-artifact": upload_pages_artifact,
    "actions/deploy-pages": deploy_pages,
    "actions/download-artifact": download_artifact,
}
