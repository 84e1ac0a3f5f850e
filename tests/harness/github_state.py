"""The GitHub fake's state: repositories, commits, faults, and one request's view of them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tests.harness.github_openapi import ApiError, now

Answer = tuple[int, Any, dict[str, str]]


@dataclass
class Commit:
    """A commit made on the fake, with the whole tree it leaves so branches can fork from it."""

    sha: str
    repo: str
    branch: str
    message: str
    tree: dict[str, bytes]
    parent: str | None


@dataclass
class Repo:
    """One repository. Issues and pull requests share numbers, as on GitHub."""

    full_name: str
    default_branch: str
    refs: dict[str, str] = field(default_factory=dict)  # "refs/heads/main" -> commit sha
    commits: dict[str, Commit] = field(default_factory=dict)
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    # A collaborator's role (``role_name``) and, for a custom role, the legacy permission
    # its base maps to (None: GitHub's own mapping of a base role); anyone else has none.
    permissions: dict[str, tuple[str, str | None]] = field(default_factory=dict)


@dataclass
class Fault:
    """A failure ``FakeGitHub.fail_next`` arranged for matching requests."""

    method: str
    pattern: re.Pattern[str]
    status: int
    times: int
    headers: dict[str, str]
    body: Any
    after: bool  # serve the request (state changes), then answer with the fault


@dataclass
class Call:
    """What a route needs from a request: its repository, path parameters, query and body."""

    repo: Repo
    args: dict[str, str]
    query: dict[str, list[str]]
    body: dict[str, Any]

    @property
    def name(self) -> str:
        return self.repo.full_name

    def param(self, name: str, default: str) -> str:
        return self.query.get(name, [default])[0]

    def issue(self, pull: bool = False) -> int:
        """The issue (or, with ``pull``, pull request) number in the path; 404 if none."""
        issue = self.repo.issues.get(int(self.args["number"]))
        if issue is None or (pull and issue["pull"] is None):
            raise ApiError(404, "Not Found")
        return int(self.args["number"])

    def comment(self) -> int:
        if int(self.args["comment_id"]) not in self.repo.comments:
            raise ApiError(404, "Not Found")
        return int(self.args["comment_id"])


def resolve(repo: Repo, ref: str) -> str:
    """A commit sha from a branch name, a full ref or a sha; GitHub's 404 otherwise."""
    for candidate in (ref, f"refs/heads/{ref}", f"refs/tags/{ref}"):
        if candidate in repo.refs:
            return repo.refs[candidate]
    if ref in repo.commits:
        return ref
    raise ApiError(404, f"No commit found for the ref {ref}")


def open_issue(repo: Repo, title: str, body: str = "", labels: tuple[str, ...] = ()) -> int:
    """Open a plain issue (not a pull request) in ``repo``; returns its number."""
    number = len(repo.issues) + 1
    repo.issues[number] = {
        "title": title,
        "body": body,
        "created_at": now(),
        "pull": None,
        "labels": list(labels),
    }
    return number
