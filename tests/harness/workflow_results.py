"""What a workflow run leaves for the tests to read (its jobs, steps, outputs and
artifacts), the runner's state while it runs, and the payload of the runs it chains."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def combined(results: Iterable[str]) -> str:
    """Several results as one (a matrix job's, a called workflow's): failure wins, then
    cancelled, then success; nothing that ran is skipped."""
    found = set(results)
    for outcome in ("failure", "cancelled", "success"):
        if outcome in found:
            return outcome
    return "skipped"


@dataclass
class StepResult:
    name: str
    outcome: str  # success, failure, skipped
    output: str = ""
    inputs: dict[str, str] = field(default_factory=dict)  # its `with:`, evaluated


@dataclass
class JobResult:
    job: str
    matrix: dict[str, Any]
    result: str  # success, failure, skipped
    steps: list[StepResult] = field(default_factory=list)
    workspace: Path | None = None
    runs_on: str = ""  # the job's `runs-on:`, evaluated (JSON text for a list)
    summary: str = ""
    outputs: dict[str, str] = field(default_factory=dict)

    def step(self, name: str) -> StepResult:
        return next(s for s in self.steps if s.name.startswith(name))


@dataclass
class WorkflowRun:
    workflow: str
    run_id: int
    concurrency_group: str | None
    jobs: list[JobResult]
    artifacts: Path
    name: str = ""  # the workflow's `name:`
    event: str = ""
    payload: dict[str, Any] = field(default_factory=dict)

    @property
    def conclusion(self) -> str:
        """GitHub's: failure if any job failed, else success (skipped jobs do not count)."""
        return "failure" if any(j.result == "failure" for j in self.jobs) else "success"

    def job(self, name: str) -> list[JobResult]:
        return [j for j in self.jobs if j.job == name]

    def result(self, name: str) -> str:
        """needs.<job>.result: a matrix job failed if any leg failed."""
        return combined(j.result for j in self.job(name))

    @property
    def ran(self) -> list[str]:
        return [j.job for j in self.jobs if j.result != "skipped"]


def workflow_run_payload(
    example: dict[str, Any] | None, done: WorkflowRun, repository: str, sha: str
) -> dict[str, Any]:
    """GitHub's ``workflow_run`` payload for a finished run (``example``: its webhook
    example): the run's id, name, event, head commit and conclusion; for a pull request
    from this repository its number, for a fork none (GitHub lists none)."""
    payload = json.loads(json.dumps(example or {}))
    pr = done.payload.get("pull_request") or {}
    head_repo = ((pr.get("head") or {}).get("repo") or {}).get("full_name")
    fork = head_repo is not None and head_repo != repository
    run = payload.setdefault("workflow_run", {})
    run.update(
        id=done.run_id,
        name=done.name,
        event=done.event,
        conclusion=done.conclusion,
        status="completed",
        head_sha=(pr.get("head") or {}).get("sha") or sha,
        pull_requests=[] if fork or not pr else [{"number": pr.get("number")}],
        head_repository={"full_name": head_repo or repository},
    )
    payload["action"] = "completed"
    payload.setdefault("repository", {})["full_name"] = repository
    return payload


@dataclass
class RunState:
    """A workflow run in progress: its id, group and files, and the jobs done so far."""

    name: str
    run_id: int
    group: str | None
    base_env: dict[str, str]  # the Actions variables and the workflow's `env:`
    artifacts: Path
    folder: Path
    jobs: list[JobResult]


@dataclass
class Leg:
    """One job (one matrix leg) in progress: its environment and its steps' outputs."""

    name: str
    spec: dict[str, Any]
    matrix: dict[str, Any]
    context: dict[str, Any]
    workspace: Path
    env: dict[str, str] = field(default_factory=dict)  # what the next step runs with
    job_env: dict[str, str] = field(default_factory=dict)  # the job's `env:`
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)  # steps.<id>

    @property
    def files(self) -> Path:
        """The runner's own files for this job (RUNNER_TEMP, GITHUB_ENV, ...)."""
        return self.workspace.parent / f"{self.workspace.name}-files"
