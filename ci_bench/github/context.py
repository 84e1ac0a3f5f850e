"""The GitHub Actions context: environment + event payload -> a typed event (pure parsing).

Only ``cli_ci`` reads ``os.environ`` and the event file; everything here takes them as data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci_bench.errors import InputError
from ci_bench.schema.base import GITHUB_LOGIN

PUBLIC_API = "https://api.github.com"
# Pull-request actions that mean new code to measure; "labeled" is the maintainer's go-ahead
# for a fork. Other actions (edited, closed, assigned, ...) have nothing to measure.
PR_ACTIONS = ("opened", "synchronize", "reopened", "labeled", "unlabeled")
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
    # The label a ``labeled`` event added, who sent the event, and the PR's labels now.
    label: str | None = None
    sender: str | None = None
    labels: tuple[str, ...] = ()
    # Who opened the pull request: they may not accept their own regression.
    author: str | None = None


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
    # The repository's default branch: the A/B base when the dispatch names none.
    default_branch: str | None = None


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
    # The run's code came from a fork (head repository other than this one).
    from_fork: bool = False


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
    # A push's head commit message (it names the pull request a merge came from).
    head_message: str | None = None

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


# The event payload is untrusted data (a dispatch form, a PR from a fork): every field is
# type- and range-checked here, into the typed events above.
MAX_REPEATS = 1_000_000
MAX_TEXT = 1024
MAX_EVENT_BYTES = 16 * 1024 * 1024
# GitHub's payloads nest about 8 deep; deeper is hostile.
MAX_EVENT_DEPTH = 64
SHA = re.compile(r"^[0-9a-fA-F]{4,64}$")
# Workflow and database ids are positive and fit 64 bits; PR numbers fit 32.
INT_MAX = 2**63 - 1
NUMBER_MAX = 2**31 - 1


def _obj(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InputError(f"{where}: must be an object, got {type(value).__name__}")
    return value


def _text(mapping: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = mapping.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise InputError(f"{where}.{key}: must be a string, got {type(value).__name__}")
    if len(value) > MAX_TEXT or any(ord(c) < 32 for c in value):
        raise InputError(f"{where}.{key}: not a plausible value (control characters or too long)")
    return value


def _login(mapping: Mapping[str, Any], where: str) -> str:
    """The account that sent the event: rendered as an @mention when it accepts a change."""
    value = _text(mapping, "login", where)
    if not GITHUB_LOGIN.fullmatch(value):
        raise InputError(f"{where}.login: not a GitHub login: {value[:80]!r}")
    return value


def _sha(mapping: Mapping[str, Any], key: str, where: str) -> str:
    value = _text(mapping, key, where)
    if not SHA.match(value):
        raise InputError(f"{where}.{key}: not a commit sha: {value[:80]!r}")
    return value


def _int(value: Any, where: str, high: int = INT_MAX) -> int:
    """A positive JSON integer (not a bool, not a float, not a string)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{where}: must be a positive integer, got {type(value).__name__}")
    if not 1 <= value <= high:
        raise InputError(f"{where}: must be between 1 and {high}, got {value}")
    return value


def _input(inputs: Mapping[str, Any], key: str) -> str | None:
    """A dispatch input: GitHub sends strings (booleans and numbers for typed inputs)."""
    value = inputs.get(key)
    if value is None or value == "":
        return None
    where = f"workflow_dispatch event payload: inputs.{key}"
    numeric = key == "repeats" and isinstance(value, int) and not isinstance(value, bool)
    if not (isinstance(value, str) or numeric):
        raise InputError(f"{where}: must be a string, got {type(value).__name__}")
    text = str(value)
    if len(text) > MAX_TEXT or any(ord(c) < 32 and c not in "\n\r\t" for c in text):
        raise InputError(f"{where}: control characters or too long")
    return text


def _split(value: str | None) -> list[str]:
    if value is None:
        return []
    return [v.strip() for v in value.replace("\n", ",").split(",") if v.strip()]


def _repeats(inputs: Mapping[str, Any]) -> int | None:
    text = _input(inputs, "repeats")
    if text is None:
        return None
    if not text.strip().isdigit():
        raise InputError(
            f"workflow_dispatch event payload: inputs.repeats: not an integer: {text[:40]!r}"
        )
    value = int(text.strip()[:20])
    if not 1 <= value <= MAX_REPEATS or len(text.strip()) > 20:
        raise InputError(
            "workflow_dispatch event payload: inputs.repeats: must be between 1 and "
            f"{MAX_REPEATS}, got {text.strip()[:40]}"
        )
    return value


def _dispatch(inputs: Mapping[str, Any], default_branch: str | None = None) -> Dispatch:
    inputs = _obj(inputs, "workflow_dispatch event payload: inputs")
    return Dispatch(
        kernels=_split(_input(inputs, "kernels")),
        profile=_input(inputs, "profile"),
        repeats=_repeats(inputs),
        baseline_version=_input(inputs, "baseline_version"),
        fail_on=_input(inputs, "fail_on"),
        cases=_split(_input(inputs, "cases")),
        mode=_input(inputs, "mode"),
        base=_ref(_input(inputs, "base")),
        default_branch=_ref(default_branch, "repository.default_branch"),
    )


def _ref(value: str | None, where: str = "inputs.base") -> str | None:
    """A git ref from a form: never something git would read as an option."""
    if value is not None and (value.startswith("-") or any(c.isspace() for c in value)):
        raise InputError(f"workflow_dispatch event payload: {where}: not a git ref: {value!r}")
    return value


def _pull_request(payload: Mapping[str, Any], where: str) -> PullRequest:
    pr = _obj(payload.get("pull_request"), f"{where}.pull_request")
    head = _obj(pr.get("head"), f"{where}.pull_request.head")
    base = _obj(pr.get("base"), f"{where}.pull_request.base")
    head_repo = head.get("repo")
    head_name = (
        _text(_obj(head_repo, f"{where}.pull_request.head.repo"), "full_name", where)
        if head_repo is not None
        else None
    )
    base_repo = _obj(base.get("repo"), f"{where}.pull_request.base.repo")
    label = payload.get("label")
    sender = payload.get("sender")
    return PullRequest(
        number=_int(pr.get("number"), f"{where}.pull_request.number", NUMBER_MAX),
        head_sha=_sha(head, "sha", f"{where}.pull_request.head"),
        base_ref=_text(base, "ref", f"{where}.pull_request.base"),
        base_sha=_sha(base, "sha", f"{where}.pull_request.base"),
        from_fork=head_name != _text(base_repo, "full_name", f"{where}.pull_request.base.repo"),
        action=_text(payload, "action", where),
        label=_text(_obj(label, f"{where}.label"), "name", f"{where}.label")
        if label is not None
        else None,
        sender=_login(_obj(sender, f"{where}.sender"), f"{where}.sender")
        if sender is not None
        else None,
        labels=_labels(pr.get("labels"), f"{where}.pull_request.labels"),
        author=_login(
            _obj(pr.get("user"), f"{where}.pull_request.user"), f"{where}.pull_request.user"
        )
        if pr.get("user") is not None
        else None,
    )


def _labels(value: Any, where: str) -> tuple[str, ...]:
    """The names of a pull request's labels (absent: none)."""
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > 1000:
        raise InputError(f"{where}: must be a list of labels")
    return tuple(_text(_obj(item, where), "name", where) for item in value)


def _workflow_run(payload: Mapping[str, Any], where: str) -> WorkflowRun:
    run = _obj(payload.get("workflow_run"), f"{where}.workflow_run")
    at = f"{where}.workflow_run"
    pulls = run.get("pull_requests") or []
    if not isinstance(pulls, list):
        raise InputError(f"{at}.pull_requests: must be a list, got {type(pulls).__name__}")
    conclusion = run.get("conclusion")
    head_repo = run.get("head_repository")
    head_name = (
        _text(_obj(head_repo, f"{at}.head_repository"), "full_name", at)
        if head_repo is not None
        else None
    )
    base_repo = payload.get("repository")
    base_name = (
        _text(_obj(base_repo, f"{where}.repository"), "full_name", where)
        if base_repo is not None
        else None
    )
    return WorkflowRun(
        run_id=_int(run.get("id"), f"{at}.id"),
        name=_text(run, "name", at, required=False),
        event=_text(run, "event", at, required=False),
        conclusion=_text(run, "conclusion", at) if conclusion is not None else None,
        head_sha=_sha(run, "head_sha", at),
        pull_numbers=[
            _int(_obj(p, f"{at}.pull_requests").get("number"), f"{at}.pull_requests.number")
            for p in pulls
        ],
        from_fork=head_name is not None and base_name is not None and head_name != base_name,
    )


def parse_event(name: str, payload: Any, ref: str | None) -> Event | None:
    """The event ci-bench acts on; None for an event it has nothing to do with.

    Every field read is type- and range-checked: a wrong one is an InputError naming it.
    """
    where = f"{name} event payload"
    payload = _obj(payload, where)
    if name in ("pull_request", "pull_request_target"):
        if payload.get("action") not in PR_ACTIONS:
            return None
        return _pull_request(payload, where)
    if name == "workflow_dispatch":
        inputs = payload.get("inputs")
        repository = payload.get("repository")
        default = (
            _text(_obj(repository, f"{where}.repository"), "default_branch", where, required=False)
            if repository is not None
            else ""
        )
        return _dispatch({} if inputs is None else inputs, default or None)
    if name == "push":
        push_ref = _text(payload, "ref", where, required=False) or ref or ""
        if not push_ref.startswith("refs/tags/"):
            return None
        return parse_tag(push_ref.removeprefix("refs/tags/"))
    if name == "release":
        release = _obj(payload.get("release"), f"{where}.release")
        return parse_tag(_text(release, "tag_name", f"{where}.release"))
    if name == "workflow_run":
        return _workflow_run(payload, where)
    return None


def read_event(path: Path) -> Any:
    """The event file's JSON: bounded, UTF-8, finite numbers, limited nesting."""
    from ci_bench.store.files import parse_json, read_bytes

    data = read_bytes(path, "event payload", limit=MAX_EVENT_BYTES)
    return parse_json(data, str(path), "event payload", max_depth=MAX_EVENT_DEPTH)


def load_context(env: Mapping[str, str]) -> ActionsContext:
    """Read the Actions environment; outside Actions, a context with no event."""
    name = env.get("GITHUB_EVENT_NAME", "")
    payload: Any = {}
    event_path = env.get("GITHUB_EVENT_PATH")
    if name and event_path:
        payload = read_event(Path(event_path))
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
        head_message=head_commit_message(payload) if name == "push" else None,
    )


_PR_IN_MESSAGE = re.compile(r"\(#(\d+)\)\s*$|^Merge pull request #(\d+)", re.MULTILINE)


def merged_pull_number(message: str | None) -> int | None:
    """The pull request a push's head commit merged: "Title (#12)" or "Merge pull request
    #12" in its first line; anything else means none, never an error."""
    first = (message or "").splitlines()[0] if message else ""
    match = _PR_IN_MESSAGE.search(first)
    return int(match[1] or match[2]) if match else None


def head_commit_message(payload: Any) -> str | None:
    """A push event's head commit message, if the payload has one."""
    if not isinstance(payload, Mapping):
        return None
    head = payload.get("head_commit")
    message = head.get("message") if isinstance(head, Mapping) else None
    return message if isinstance(message, str) else None
