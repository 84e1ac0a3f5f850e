"""The GitHub edge, through PyGithub: the sticky comment and baseline commits.

Retries (5xx, primary and secondary rate limits) are PyGithub's ``GithubRetry``, a
maintained urllib3 policy, with two changes (``_Retry``): a POST is retried only when GitHub
refused it (a rate limit), never after a 5xx or a timeout, since GitHub may have acted and
still answered 502; and ``Retry-After`` is held to ``max_rate_limit_wait``. Creating the
sticky comment again after such a failure first looks for the marker. Errors surface as
``GitHubError`` with a one-line message that quotes GitHub and never contains the token.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from github import Auth, Github, GithubException, GithubRetry, UnknownObjectException
from github.GithubException import RateLimitExceededExceedsMaxWait
from pydantic import BaseModel, ConfigDict, Field
from requests.exceptions import ConnectionError as RequestsConnectionError
from requests.exceptions import Timeout
from urllib3.util.retry import Retry

from ci_bench.errors import CiBenchError, ExitCode
from ci_bench.github.markers import SUPERSEDED, is_legacy

COMMENT_LIMIT = 65_536  # GitHub's maximum issue comment body, in characters
# A repository's base roles (``role_name``) and the legacy permission each reads as.
BASE_ROLES = ("admin", "maintain", "write", "triage", "read")
_LEGACY = {"maintain": "write", "triage": "read"}


@dataclass(frozen=True)
class Role:
    """A collaborator's role: ``name`` as GitHub names it (``role_name``), and the legacy
    permission it maps to (admin, write, read or none)."""

    name: str
    legacy: str


@dataclass(frozen=True)
class PullNow:
    """What a writer of the comment reads of the pull request before writing."""

    head_sha: str
    labels: tuple[str, ...]


class GitHubError(CiBenchError):
    """A GitHub API step failed after retries."""

    exit_code = ExitCode.GITHUB


Compose = Callable[[str | None], str]


class ApiSettings(BaseModel):
    """API client behaviour, ``[tool.ci-bench.github]`` in the config; the defaults suit
    github.com, tests shorten the waits."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        alias_generator=lambda s: s.replace("_", "-"),
        allow_inf_nan=False,
    )

    # Bounded: a config value of 1e9 would make a step wait for decades.
    per_page: int = Field(100, ge=1, le=100)
    timeout: int = Field(30, ge=1, le=3600)
    retries: int = Field(4, ge=0, le=100)
    backoff: float = Field(2.0, ge=0, le=3600, description="seconds, doubled per retry")
    max_rate_limit_wait: float = Field(300.0, ge=0, le=24 * 3600)
    seconds_between_requests: float | None = Field(0.25, ge=0, le=3600)
    seconds_between_writes: float | None = Field(1.0, ge=0, le=3600)
    # Only this account's comments count as ours: anyone can paste the hidden marker.
    comment_author: str | None = "github-actions[bot]"
    # The sticky comment's marker names this workflow family and the pull request, so each
    # pull request has ONE comment whatever the mode and device.
    comment_key: str = Field("benchmark", pattern=r"^[A-Za-z0-9_. ]{1,64}$")


def github_message(exc: GithubException) -> str | None:
    """GitHub's own error text, on one line (rule violations come as several)."""
    message = exc.data.get("message") if isinstance(exc.data, dict) else None
    return " ".join(str(message).split()) if message else None


def _describe(exc: GithubException, what: str) -> str:
    if isinstance(exc, RateLimitExceededExceedsMaxWait):
        return (
            f"GitHub API: {what} failed: HTTP {exc.status}: GitHub asked to wait "
            f"{exc.wait:.0f} s, more than max-rate-limit-wait allows"
        )
    message = github_message(exc)
    return f"GitHub API: {what} failed: HTTP {exc.status}{f' ({message})' if message else ''}"


class _Retry(GithubRetry):
    """``GithubRetry`` that never repeats a POST GitHub may have performed, and caps waits.

    A POST answered 403/429 with a rate limit was refused, so it is retried like a GET; a
    POST answered 5xx (or timing out) may have been performed and is left to the caller.
    A ``Retry-After`` longer than ``max_rate_limit_wait`` fails at once instead of sleeping.
    """

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        if method == "POST" and status_code in (403, 429):
            method = "GET"  # refused, not performed: as safe to repeat as a read
        return super().is_retry(method, status_code, has_retry_after)

    def increment(  # type: ignore[override]
        self,
        method: str | None = None,
        url: str | None = None,
        response: Any = None,
        error: Exception | None = None,
        _pool: Any = None,
        _stacktrace: Any = None,
    ) -> Retry:
        if response is not None and self.max_rate_limit_wait is not None:
            wait = self.get_retry_after(response)
            if wait is not None and wait > self.max_rate_limit_wait:
                body = self.get_content(response, url or "")
                raise RateLimitExceededExceedsMaxWait(
                    response.status, body, response.headers, wait=wait
                )
        return super().increment(method, url, response, error, _pool, _stacktrace)


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
        retry = _Retry(
            total=s.retries,
            backoff_factor=s.backoff,
            max_rate_limit_wait=s.max_rate_limit_wait,
            # No POST: see _Retry. PATCH sends the whole comment body, so repeating is safe.
            allowed_methods=Retry.DEFAULT_ALLOWED_METHODS | {"GET", "PATCH"},
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
        self._create_attempts = s.retries + 1
        self._backoff = s.backoff
        self._repo = self._gh.get_repo(repository, lazy=True)

    def upsert_comment(
        self, number: int, tag: str, body: str | Compose, *, legacy: str | None = None
    ) -> tuple[str, str]:
        """Edit the comment that starts with ``tag`` in place, or create it; one per tag.

        ``body`` may be a function of the existing comment's body (without its marker), so a
        job can rewrite its own section and keep the others. A comment that starts with
        ``legacy`` (an older marker) is edited when no comment has ``tag``. A create that
        fails with a 5xx or a timeout may still have created the comment, so before
        creating again the comments are listed anew and the marker looked for.
        """
        compose = body if callable(body) else (lambda _old, text=body: text)
        with api_step(f"updating the comment on #{number}"):
            issue = self._repo.get_issue(number)
            for attempt in range(self._create_attempts):
                found, older = self._find_all(issue, tag, legacy)
                old = (
                    found.body.split("\n", 1)[1]
                    if found is not None and found.body.startswith(tag) and "\n" in found.body
                    else None
                )
                text = f"{tag}\n{compose(old)}"
                if len(text) > COMMENT_LIMIT:
                    raise GitHubError(
                        f"comment body is {len(text)} characters; GitHub allows {COMMENT_LIMIT}"
                    )
                if found is not None and found.body == text:
                    # After a failed create, our own comment is there: that create worked.
                    self._supersede(older, found.html_url)
                    return ("created" if attempt else "unchanged"), found.html_url
                if found is not None:
                    found.edit(text)
                    self._supersede(older, found.html_url)
                    return "updated", found.html_url
                try:
                    url = issue.create_comment(text).html_url
                    self._supersede(older, url)
                    return "created", url
                except GithubException as exc:
                    if exc.status < 500 or attempt + 1 == self._create_attempts:
                        raise
                except (Timeout, RequestsConnectionError):
                    if attempt + 1 == self._create_attempts:
                        raise
                time.sleep(self._backoff * 2**attempt)
            raise AssertionError("unreachable")

    def find_comment(self, number: int, tag: str, legacy: str | None = None) -> str | None:
        """The body of our sticky comment (without its marker), or None when there is none."""
        with api_step(f"reading the comments of #{number}"):
            found = self._find(self._repo.get_issue(number), tag, legacy)
        if found is None:
            return None
        return found.body.split("\n", 1)[1] if "\n" in found.body else ""

    def _find(self, issue: Any, tag: str, legacy: str | None) -> Any:
        return self._find_all(issue, tag, legacy)[0]

    def _find_all(self, issue: Any, tag: str, legacy: str | None) -> tuple[Any, list[Any]]:
        """Our comment with ``tag`` (else the newest of ours with an older ci-bench marker,
        whatever workflow name it carries), and every other older one: those are stale
        verdicts that must not stay up beside the current one."""
        ours = [
            c
            for c in issue.get_comments()
            if (self.comment_author is None or c.user.login == self.comment_author) and c.body
        ]
        exact = next((c for c in ours if c.body.startswith(tag)), None)
        if legacy is None:
            return exact, []
        older = [c for c in ours if is_legacy(c.body)]
        if exact is None and older:
            exact = older.pop()
        return exact, older

    def _supersede(self, older: list[Any], url: str) -> None:
        """Each older ci-bench comment becomes one line pointing at the current one."""
        for comment in older:
            comment.edit(
                f"{SUPERSEDED}\n<sub>An older ci-bench comment, superseded by "
                f"[the current one]({url}).</sub>"
            )

    def remove_label(self, number: int, label: str) -> bool:
        """Take ``label`` off the pull request; False when it was not there."""
        with api_step(f"removing the label {label!r} from #{number}"):
            try:
                self._repo.get_issue(number).remove_from_labels(label)
            except GithubException as exc:
                if exc.status == 404:  # "Label does not exist": already gone
                    return False
                raise
        return True

    def role(self, login: str) -> Role:
        """``login``'s role on the repository: GitHub's ``role_name`` (admin, maintain,
        write, triage, read, or a custom role's name), and for a custom role the legacy
        ``permission`` its base maps to (maintain reads as write there, triage as read,
        so only ``role_name`` tells them apart). No collaborator: role ``none``."""
        with api_step(f"reading the role of @{login}"):
            try:
                name = self._repo.get_collaborator_role_name(login)
                legacy = (
                    None if name in BASE_ROLES else self._repo.get_collaborator_permission(login)
                )
            except UnknownObjectException:
                return Role("none", "none")
        return Role(str(name), str(legacy or _LEGACY.get(name, name)))

    def pull_now(self, number: int) -> PullNow:
        """The pull request as it is now: its head and its labels (one request)."""
        with api_step(f"reading pull request #{number}"):
            pull = self._repo.get_pull(number)
            return PullNow(pull.head.sha, tuple(label.name for label in pull.labels))

    def pull_head_sha(self, number: int) -> str:
        return self.pull_now(number).head_sha

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
    ) -> tuple[Literal["written", "conflict"], str]:
        """Create (sha None) or update a file; a 409 (or a 422 on create) is a conflict.

        Returns the outcome and, for a conflict, GitHub's message: a stale sha and a
        protected branch both answer 409, and only the message tells them apart.
        """
        with api_step(f"writing {path} on {branch}"):
            try:
                if sha is None:
                    self._repo.create_file(path, message, text, branch=branch)
                else:
                    self._repo.update_file(path, message, text, sha, branch=branch)
            except GithubException as exc:
                if exc.status == 409 or (exc.status == 422 and sha is None):
                    return "conflict", github_message(exc) or f"HTTP {exc.status}"
                raise
        return "written", ""

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

    def find_pull_request(self, branch: str, base: str) -> str | None:
        """The open pull request from ``branch`` into ``base``, if there is one."""
        owner = self.repository.split("/")[0]
        with api_step(f"looking for a pull request from {branch}"):
            for pull in self._repo.get_pulls(state="open", head=f"{owner}:{branch}", base=base):
                return pull.html_url
        return None

    def open_pull_request(self, branch: str, base: str, title: str, body: str) -> str | None:
        """Open a PR; an identical one already open (HTTP 422) is fine: returns None.

        A refusal (403, e.g. Actions may not create pull requests) raises ``GitHubError``
        quoting GitHub's message.
        """
        with api_step(f"opening a pull request from {branch} into {base}"):
            try:
                return self._repo.create_pull(
                    base=base, head=branch, title=title, body=body
                ).html_url
            except GithubException as exc:
                if exc.status == 422 and "already exists" in str(exc.data):
                    return None
                raise


Merge = Callable[[str | None], str | None]


def commit_with_retry(
    client: GitHubClient, path: str, branch: str, message: str, merge: Merge, attempts: int = 2
) -> Literal["written", "unchanged"]:
    """Read-merge-write one file; on a concurrent change, re-read and merge again
    (``attempts`` in all: history appends of a burst of merges may meet several).

    ``merge`` gets the current text (None if absent) and returns the new text, or None
    when nothing needs to change, which makes re-runs idempotent.
    """
    tried: str | None = None
    for attempt in range(1, attempts + 1):
        current = client.read_file(path, branch)
        text, sha = current if current else (None, None)
        if tried is not None and text == tried:
            # Our write landed though GitHub answered an error (a 502 after the commit):
            # the retry then met its own change. It was written, not "unchanged".
            return "written"
        new_text = merge(text)
        if new_text is None:
            return "unchanged"
        tried = new_text
        outcome, why = client.write_file(path, new_text, message, branch, sha)
        if outcome == "written":
            return "written"
        if attempt == attempts:
            raise GitHubError(
                f"GitHub API: writing {path} on {branch} refused {attempts} times, re-read "
                "in between "
                f"(GitHub: {why}); not written. A protected branch refuses direct writes: "
                'set promote-via = "pull-request"'
            )
    raise AssertionError("unreachable")
