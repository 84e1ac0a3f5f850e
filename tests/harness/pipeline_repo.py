"""The pipeline test's world: a kernel library's git repository with this project's
workflows, the local fake GitHub, a runner emulation, and GitHub's webhook examples
pointed at the repository's commits.

A commit changes the kernel the way a pull request would: one line of
``tests/fixtures/pipeline_kernel.py`` (``UNITS``, ``MISBEHAVE``) or of its pyproject.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.harness import forkserver
from tests.harness.github_server import FakeGitHub
from tests.harness.workflow_runner import Runner, WorkflowRun

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
EVENTS = FIXTURES / "events"
REPO = "Codertocat/Hello-World"  # the repository the webhook examples come from
FORK = "someone-else/Hello-World"
TOKEN = "ghs_pipeline_token"
NUMBER = 2  # the examples' pull request number
MAINTAINER = "octo-maintainer"
PYPROJECT = """\
[tool.ci-bench]
kernels = ["pipeline_kernel"]
warmup = 1
repeats = 3
ab-repeats = 12

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


def make_template(folder: Path) -> Path:
    """``master`` with the project at its first commit (UNITS = 2)."""
    git(folder, "init", "-q", "-b", "master")
    git(folder, "config", "user.email", "ci@example.com")
    git(folder, "config", "user.name", "CI")
    # The docs site too: pages.yml (ci-bench's own workflow) publishes it with the dashboard.
    for sub in (".github/workflows", "scripts", "constraints", "docs"):
        shutil.copytree(ROOT / sub, folder / sub)
    shutil.copy2(ROOT / "mkdocs.yml", folder / "mkdocs.yml")
    shutil.copy2(FIXTURES / "pipeline_kernel.py", folder / "pipeline_kernel.py")
    (folder / "pyproject.toml").write_text(PYPROJECT)
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "a kernel library with ci-bench")
    git(folder, "tag", "v0.1.0")
    return folder


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


@dataclass
class World:
    """One scenario's repository, GitHub and runners."""

    repo: Path  # a working clone: scenarios commit here; the runners clone from it
    server: FakeGitHub
    runner: Runner
    base: str  # master's first commit
    heads: dict[str, str] = field(default_factory=dict)

    # -- commits -------------------------------------------------------------------------
    def commit(
        self,
        branch: str,
        start: str,
        message: str,
        files: dict[str, str] | None = None,
        **edits: str,
    ) -> str:
        """A commit on ``branch`` (created at ``start``); ``edits``: UNITS, MISBEHAVE,
        NOTES (a text file) or CONFIG (appended to the pyproject's [tool.ci-bench]);
        ``files``: more files by path."""
        existing = git(self.repo, "branch", "--list", branch)
        git(self.repo, "checkout", "-q", *(["-B", branch, start] if not existing else [branch]))
        kernel = self.repo / "pipeline_kernel.py"
        text = kernel.read_text()
        if "UNITS" in edits:
            text = re.sub(r"^UNITS = .*$", f"UNITS = {edits['UNITS']}", text, flags=re.M)
        if "MISBEHAVE" in edits:
            text = re.sub(
                r"^MISBEHAVE = .*$", f"MISBEHAVE = {edits['MISBEHAVE']!r}", text, flags=re.M
            )
        kernel.write_text(text)
        if "NOTES" in edits:
            (self.repo / "NOTES.md").write_text(edits["NOTES"])
        if "CONFIG" in edits:
            pyproject = self.repo / "pyproject.toml"
            head, sep, tail = pyproject.read_text().partition("\n[tool.ci-bench.github]")
            pyproject.write_text(head.rstrip("\n") + "\n" + edits["CONFIG"] + "\n" + sep + tail)
        for name, text in (files or {}).items():
            (self.repo / name).parent.mkdir(parents=True, exist_ok=True)
            (self.repo / name).write_text(text)
        git(self.repo, "add", "-A")
        git(self.repo, "commit", "-q", "-m", message)
        sha = git(self.repo, "rev-parse", "HEAD")
        git(self.repo, "checkout", "-q", "--detach")
        return sha

    # -- events --------------------------------------------------------------------------
    def pull_request(
        self,
        action: str,
        head: str,
        *,
        base: str | None = None,
        fork: bool = False,
        label: str | None = None,
        labels: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        """A pull-request example (opened / synchronize / labeled) at these commits.

        Derived, not from the package: a fork (the head repository renamed), the label
        and the PR's labels (names only; the example's label object otherwise).
        """
        name = {
            "opened": "pull_request_opened.json",
            "synchronize": "pull_request_synchronize.json",
            "labeled": "pull_request_labeled.json",
            "unlabeled": "pull_request_labeled.json",  # derived: the same shape
        }[action]
        payload = event(
            name,
            action=action,
            **{
                "pull_request.head.sha": head,
                "pull_request.base.sha": base or git(self.repo, "rev-parse", "master"),
                "repository.full_name": REPO,
            },
        )
        if fork:
            payload["pull_request"]["head"]["repo"]["full_name"] = FORK
        if label is not None:
            payload["label"]["name"] = label
            payload["sender"]["login"] = MAINTAINER
        example = event("pull_request_labeled.json")["label"]
        payload["pull_request"]["labels"] = [{**example, "name": n} for n in labels]
        return payload

    def on_pr(self, payload: dict[str, Any], *, lowering: bool = False) -> WorkflowRun:
        """GitHub sends ``pull_request_target`` (benchmark.yml) and ``pull_request``
        (lower.yml, then lower-relay.yml) for each push; ``lowering`` runs the second too."""
        base = git(self.repo, "rev-parse", "master")
        pr = payload["pull_request"]
        labels = tuple(label["name"] for label in pr["labels"])
        self.server.set_pull(REPO, NUMBER, pr["head"]["sha"], pr["base"]["sha"], labels)
        runs = self.runner.dispatch("pull_request_target", payload, "refs/heads/master", base)
        assert [r.workflow for r in runs] == ["benchmark.yml"]
        if lowering and payload["action"] != "labeled":
            ref = f"refs/pull/{NUMBER}/merge"
            more = self.runner.dispatch("pull_request", payload, ref, base)
            assert [r.workflow for r in more] == ["lower.yml", "lower-relay.yml"], more
            self.lowering_runs = more
        return runs[0]

    # -- what GitHub holds ---------------------------------------------------------------
    def comments(self) -> list[str]:
        repo = self.server.repos[REPO.lower()]
        return [c["body"] for c in repo.comments.values() if c["issue"] == NUMBER]

    def the_comment(self) -> str:
        (body,) = self.comments()
        return body

    def headline(self) -> str:
        """The comment's first heading: what a reviewer reads first."""
        return next(line for line in self.the_comment().splitlines() if line.startswith("### "))


def report_of(run: WorkflowRun) -> dict[str, Any]:
    path = run.artifacts / "ci-bench-report" / "report.json"
    assert path.is_file(), f"no report in the run's artifact\n{failures(run)}"
    return json.loads(path.read_text())


def failures(run: WorkflowRun) -> str:
    """Every failed step's output, for assertion messages."""
    return "\n".join(
        f"--- {j.job} {j.matrix} / {s.name}\n{s.output[-3000:]}"
        for j in run.jobs
        for s in j.steps
        if s.outcome == "failure"
    )


def new_world(template: Path, tmp: Path, jax_cache: Path, pr_mode: str) -> tuple[World, Any]:
    """A fresh clone of the template, its own fake GitHub (entered) and runner."""
    repo = tmp / "repo"
    subprocess.run(["git", "clone", "-q", str(template), str(repo)], check=True)
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Dev")
    git(repo, "checkout", "-q", "--detach")
    server = FakeGitHub(
        token=TOKEN, repos=(REPO,), login="github-actions[bot]", default_branch="master"
    )
    context = server.__enter__()
    context.add_issue(REPO, "An issue")
    context.add_issue(REPO, "Update the README with new information.")  # number 2
    context.set_permission(REPO, MAINTAINER, "write")  # accepts like an approving reviewer
    runner = Runner(
        origin=repo,
        root=tmp / "runs",
        api_url=context.url,
        repository=REPO,
        token=TOKEN,
        # this venv, its ci-bench a fork of a server that imported it (each call its own
        # process, without the ~2 s of imports: tests/harness/forkserver.py)
        installed={
            "CI_BENCH_VENV": str(forkserver.venv(tmp / "venv")),
            "CI_BENCH_JAX_CACHE": str(jax_cache),
        },
        variables={"CI_BENCH_PR_MODE": pr_mode},
        workflow_run_example=event("workflow_run_completed.json"),
        tool_cache=tmp / "tool-cache",
    )
    base = git(repo, "rev-parse", "master")
    return World(repo, context, runner, base), server
