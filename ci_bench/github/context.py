"""The GitHub Actions context: environment + event payload -> a typed event (pure parsing).

Only ``cli_ci`` reads ``os.environ`` and the event file; everything here takes them as data.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci_bench.errors import InputError
from ci_bench.text import split_list

PUBLIC_API = "https://api.github.com"
# Pull-request actions that mean new code to measure; "labeled" is the maintainer's go-ahead
# for a fork. Other actions (edited, closed, assigned, ...) have nothing to measure.
PR_ACTIONS = ("opened", "synchronize", "reopened", "labeled")
LIBRARY_TAG = re.compile(r"^v(?P<version>\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)$")
KERNEL_TAG = re.compile(
    r"^(?P<kernel>[a-z][a-z0-9_]*)-v(?P<version>\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)$"
)


@dataclass(frozen=True)
class PullRequest:
    number: int
    head_sha: str
    base_ref: str
    base_sha: str
    # A pull request from a fork runs with a read-only token: it cannot comment itself.
    from_fork: bool
    action: str


@dataclass(frozen=True)
class Dispatch:
    kernels: list[str] = field(default_factory=list)
    profile: str | None = None
    repeats: int | None = None
    baseline_version: str | None = None
    fail_on: str | None = None
    cases: list[str] = field(default_factory=list)
    mode: str | None = None
    base: str | None = None


@dataclass(frozen=True)
class Release:
    """A tag to promote: ``v1.2.0`` (every kernel) or ``matmul-v0.2.0`` (one kernel)."""

    tag: str
    kernel: str | None
    version: str


@dataclass(frozen=True)
class WorkflowRun:
    run_id: int
    name: str
    event: str
    conclusion: str | None
    head_sha: str
    pull_numbers: list[int]


Event = PullRequest | Dispatch | Release | WorkflowRun


@dataclass(frozen=True)
class ActionsContext:
    event_name: str
    event: Event | None
    repository: str
    sha: str | None
    ref: str | None
    token: str | None = field(repr=False)
    api_url: str
    server_url: str
    run_id: str | None
    workflow: str | None
    step_summary: Path | None
    output: Path | None

    @property
    def run_url(self) -> str | None:
        if not self.run_id:
            return None
        return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"


def parse_tag(tag: str) -> Release:
    if match := KERNEL_TAG.match(tag):
        return Release(tag, match["kernel"], match["version"])
    if match := LIBRARY_TAG.match(tag):
        return Release(tag, None, match["version"])
    raise InputError(f"tag {tag!r} is neither v<semver> nor <kernel>-v<semver>; nothing to promote")


def _dispatch(inputs: Mapping[str, Any]) -> Dispatch:
    repeats = inputs.get("repeats")
    try:
        repeat_count = int(repeats) if repeats not in (None, "") else None
    except (TypeError, ValueError):
        raise InputError(f"workflow_dispatch input repeats: not an integer: {repeats!r}") from None
    return Dispatch(
        kernels=split_list(inputs.get("kernels")),
        profile=str(inputs["profile"]) if inputs.get("profile") else None,
        repeats=repeat_count,
        baseline_version=str(inputs["baseline_version"])
        if inputs.get("baseline_version")
        else None,
        fail_on=str(inputs["fail_on"]) if inputs.get("fail_on") else None,
        cases=split_list(inputs.get("cases")),
        mode=str(inputs["mode"]) if inputs.get("mode") else None,
        base=str(inputs["base"]) if inputs.get("base") else None,
    )


def parse_event(name: str, payload: Mapping[str, Any], ref: str | None) -> Event | None:
    """The event ci-bench acts on; None for an event it has nothing to do with."""
    try:
        if name in ("pull_request", "pull_request_target"):
            if payload.get("action") not in PR_ACTIONS:
                return None
            pr = payload["pull_request"]
            head_repo = (pr["head"].get("repo") or {}).get("full_name")
            return PullRequest(
                number=int(pr["number"]),
                head_sha=pr["head"]["sha"],
                base_ref=pr["base"]["ref"],
                base_sha=pr["base"]["sha"],
                from_fork=head_repo != pr["base"]["repo"]["full_name"],
                action=str(payload.get("action", "")),
            )
        if name == "workflow_dispatch":
            return _dispatch(payload.get("inputs") or {})
        if name == "push":
            push_ref = payload.get("ref") or ref or ""
            if not push_ref.startswith("refs/tags/"):
                return None
            return parse_tag(push_ref.removeprefix("refs/tags/"))
        if name == "release":
            return parse_tag(payload["release"]["tag_name"])
        if name == "workflow_run":
            run = payload["workflow_run"]
            return WorkflowRun(
                run_id=int(run["id"]),
                name=str(run.get("name") or ""),
                event=str(run.get("event") or ""),
                conclusion=run.get("conclusion"),
                head_sha=run["head_sha"],
                pull_numbers=[int(p["number"]) for p in run.get("pull_requests") or []],
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{name} event payload: missing or invalid field {exc}") from None
    return None


def load_context(env: Mapping[str, str]) -> ActionsContext:
    """Read the Actions environment; outside Actions, a context with no event."""
    name = env.get("GITHUB_EVENT_NAME", "")
    payload: Mapping[str, Any] = {}
    event_path = env.get("GITHUB_EVENT_PATH")
    if name and event_path:
        try:
            payload = json.loads(Path(event_path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(
                f"{event_path}: cannot read the event payload: {exc.strerror}"
            ) from None
        except json.JSONDecodeError as exc:
            raise InputError(f"{event_path}: invalid JSON in the event payload: {exc}") from None
    ref = env.get("GITHUB_REF")
    return ActionsContext(
        event_name=name,
        event=parse_event(name, payload, ref) if name else None,
        repository=env.get("GITHUB_REPOSITORY", ""),
        sha=env.get("GITHUB_SHA"),
        ref=ref,
        token=env.get("GITHUB_TOKEN") or None,
        api_url=(env.get("GITHUB_API_URL") or PUBLIC_API).rstrip("/"),
        server_url=(env.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/"),
        run_id=env.get("GITHUB_RUN_ID"),
        workflow=env.get("GITHUB_WORKFLOW"),
        step_summary=Path(env["GITHUB_STEP_SUMMARY"]) if env.get("GITHUB_STEP_SUMMARY") else None,
        output=Path(env["GITHUB_OUTPUT"]) if env.get("GITHUB_OUTPUT") else None,
    )
