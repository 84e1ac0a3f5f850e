"""The GitHub edge, through PyGithub: the sticky comment and baseline commits.

Retries (5xx, primary and secondary rate limits) are PyGithub's ``GithubRetry``, a
maintained urllib3 policy, rather than a loop of our own. Errors surface as ``GitHubError``
with a one-line message that never contains the token.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

from github import Auth, Github, GithubException, GithubRetry, UnknownObjectException
from pydantic import BaseModel, ConfigDict, Field
from urllib3.util.retry import Retry

from ci_bench.errors import CiBenchError, ExitCode

COMMENT_LIMIT = 65_536  # GitHub's maximum issue comment body, in characters


class GitHubError(CiBenchError):
    """A GitHub API step failed after retries."""

    exit_code = ExitCode.GITHUB


def marker(workflow: str, device: str, mode: str = "baseline") -> str:
    """The hidden first line that makes one comment per (workflow, device, mode) findable."""
    clean = "".join(ch for ch in f"{workflow}|{device}|{mode}" if ch not in "<>-\n")
    return f"<!-- ci-bench sticky: {clean} -->"


class ApiSettings(BaseModel):
    """API client behaviour, ``[tool.ci-bench.github]`` in the config; the defaults suit
    github.com, tests shorten the waits."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        alias_generator=lambda s: s.replace("_", "-"),
    )

    per_page: int = Field(100, ge=1, le=100)
    timeout: int = Field(30, ge=1)
    retries: int = Field(4, ge=0)
    backoff: float = Field(2.0, ge=0, description="seconds, doubled per retry")
    max_rate_limit_wait: float = Field(300.0, ge=0)
    seconds_between_requests: float | None = Field(0.25, ge=0)
    seconds_between_writes: float | None = Field(1.0, ge=0)
    # Only this account's comments count as ours: anyone can paste the hidden marker.
    comment_author: str | None = "github-actions[bot]"


def _describe(exc: GithubException, what: str) -> str:
    message = exc.data.get("message") if isinstance(exc.data, dict) else None
    return f"GitHub API: {what} failed: HTTP {exc.status}{f' ({message})' if message else ''}"


@contextmanager
def api_step(what: str) -> Iterator[None]:
    """Turn PyGithub and network failures into one-line GitHubErrors."""
    try:
        yield
    except GithubException as exc:
        raise GitHubError(_describe(exc, what)) from None
    except OSError as exc:  # connection refused, DNS, TLS, timeouts
        raise GitHubError(f"GitHub API: {what} failed: {type(exc).__name__}: {exc}") from None


class GitHubClient:
    """The few operations ci-bench needs, on one repository."""

    def __init__(
        self, token: str, api_url: str, repository: str, settings: ApiSettings | None = None
    ) -> None:
        s = settings or ApiSettings()
        retry = GithubRetry(
            total=s.retries,
            backoff_factor=s.backoff,
            max_rate_limit_wait=s.max_rate_limit_wait,
            allowed_methods=Retry.DEFAULT_ALLOWED_METHODS | {"GET", "POST", "PATCH"},
        )
        self._gh = Github(
            auth=Auth.Token(token),
            base_url=api_url,
            per_page=s.per_page,
            timeout=s.timeout,
            retry=retry,
            seconds_between_requests=s.seconds_between_requests,
            seconds_between_writes=s.seconds_between_writes,
        )
        self.repository = repository
        self.comment_author = s.comment_author
        self._repo = self._gh.get_repo(repository, lazy=True)

    def upsert_comment(self, number: int, tag: str, body: str) -> tuple[str, str]:
        """Edit the comment that starts with ``tag`` in place, or create it; one per tag."""
        text = f"{tag}\n{body}"
        if len(text) > COMMENT_LIMIT:
            raise GitHubError(
                f"comment body is {len(text)} characters; GitHub allows {COMMENT_LIMIT}"
            )
        with api_step(f"updating the comment on #{number}"):
            issue = self._repo.get_issue(number)
            for comment in issue.get_comments():
                mine = self.comment_author is None or comment.user.login == self.comment_author
                if mine and comment.body and comment.body.startswith(tag):
                    if comment.body != text:
                        comment.edit(text)
                        return "updated", comment.html_url
                    return "unchanged", comment.html_url
            created = issue.create_comment(text)
            return "created", created.html_url

    def pull_head_sha(self, number: int) -> str:
        with api_step(f"reading pull request #{number}"):
            return self._repo.get_pull(number).head.sha

    def default_branch(self) -> str:
        with api_step("reading the repository"):
            return self._gh.get_repo(self.repository).default_branch

    def read_file(self, path: str, branch: str) -> tuple[str, str] | None:
        """(text, blob sha) of a file on a branch, or None when it does not exist."""
        with api_step(f"reading {path}"):
            try:
                content = self._repo.get_contents(path, ref=branch)
            except UnknownObjectException:
                return None
            if isinstance(content, list):
                raise GitHubError(f"GitHub API: {path} is a folder, not a baseline file")
            return content.decoded_content.decode("utf-8"), content.sha

    def write_file(
        self, path: str, text: str, message: str, branch: str, sha: str | None
    ) -> Literal["written", "conflict"]:
        """Create (sha None) or update a file; a stale sha reports a conflict, not an error."""
        with api_step(f"writing {path}"):
            try:
                if sha is None:
                    self._repo.create_file(path, message, text, branch=branch)
                else:
                    self._repo.update_file(path, message, text, sha, branch=branch)
            except GithubException as exc:
                if exc.status == 409 or (exc.status == 422 and sha is None):
                    return "conflict"
                raise
        return "written"

    def ensure_branch(self, branch: str, from_branch: str) -> None:
        """Create ``branch`` at the head of ``from_branch`` unless it exists."""
        with api_step(f"creating branch {branch}"):
            try:
                # The repository object is lazy: reading .object makes the request.
                if self._repo.get_git_ref(f"heads/{branch}").object.sha:
                    return
            except UnknownObjectException:
                pass
            head = self._repo.get_git_ref(f"heads/{from_branch}").object.sha
            self._repo.create_git_ref(f"refs/heads/{branch}", head)

    def open_pull_request(self, branch: str, base: str, title: str, body: str) -> str | None:
        """Open a PR; an identical one already open (HTTP 422) is fine: returns None."""
        with api_step(f"opening a pull request from {branch}"):
            try:
                return self._repo.create_pull(
                    base=base, head=branch, title=title, body=body
                ).html_url
            except GithubException as exc:
                if exc.status == 422:
                    return None
                raise


Merge = Callable[[str | None], str | None]


def commit_with_retry(
    client: GitHubClient, path: str, branch: str, message: str, merge: Merge
) -> Literal["written", "unchanged"]:
    """Read-merge-write one file; on a concurrent change, re-read and merge once more.

    ``merge`` gets the current text (None if absent) and returns the new text, or None
    when nothing needs to change, which makes re-runs idempotent.
    """
    for attempt in (1, 2):
        current = client.read_file(path, branch)
        text, sha = current if current else (None, None)
        new_text = merge(text)
        if new_text is None:
            return "unchanged"
        if client.write_file(path, new_text, message, branch, sha) == "written":
            return "written"
        if attempt == 2:
            raise GitHubError(f"GitHub API: {path} changed concurrently twice; not written")
    raise AssertionError("unreachable")
