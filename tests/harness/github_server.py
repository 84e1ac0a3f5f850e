"""A real HTTP server on localhost that speaks enough of GitHub's REST API for ci-bench.

Tests point PyGithub at ``FakeGitHub.url`` (its ``base_url``) instead of mocking it, so the
client's URL building, pagination, retries and error mapping run as in production. State
lives in memory; every request is recorded and all traffic is checked against GitHub's
OpenAPI description (``tests/harness/github_openapi.py``), so drift shows up in ``violations``.

To share the fixture across a test folder, put in its ``conftest.py``::

    from tests.harness.github_server import fake_github  # noqa: F401
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import threading
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.harness import github_openapi as api
from tests.harness.github_openapi import ApiError, RecordedRequest, Shapes, Violation
from tests.harness.github_routes import Routes
from tests.harness.github_state import Answer, Commit, Fault, Repo, open_issue, resolve

__all__ = ["Commit", "FakeGitHub", "Repo", "fake_github"]


class FakeGitHub(Routes):
    """GitHub's REST API on ``127.0.0.1``, on a free port, served from a background thread.

    Use as a context manager (``with FakeGitHub() as gh:``) or through ``fake_github``.
    ``token=None`` accepts unauthenticated requests; otherwise the ``Authorization`` header
    must carry ``token <token>`` or ``Bearer <token>``, else 401 as on GitHub.
    """

    def __init__(
        self,
        token: str | None = "t",
        repos: tuple[str, ...] = ("octo-org/ci-bench",),
        login: str = "ci-bench-bot",
        default_branch: str = "main",
    ) -> None:
        self.token = token
        self.login = login
        self.requests: list[RecordedRequest] = []
        self.violations: list[Violation] = []
        self.commits: list[Commit] = []  # made through the API, oldest first
        self.repos: dict[str, Repo] = {}
        self.url = ""
        self._shapes = Shapes("")
        self._faults: list[Fault] = []
        self._lock = threading.RLock()  # one request at a time: state stays consistent
        self._ids = itertools.count(1001)
        self._httpd: ThreadingHTTPServer | None = None
        for full_name in repos:
            self.add_repo(full_name, default_branch)

    def __enter__(self) -> FakeGitHub:
        """Bind a free port and serve until exit."""
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._shapes = Shapes(self.url)
        # A short poll interval keeps ``shutdown``, so each test's teardown, quick.
        serve = functools.partial(self._httpd.serve_forever, poll_interval=0.01)
        threading.Thread(target=serve, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    # -- test controls ---------------------------------------------------------------------

    def add_repo(self, full_name: str, default_branch: str = "main") -> Repo:
        """Create a repository whose default branch holds one empty commit."""
        repo = Repo(full_name, default_branch)
        root = Commit(self._commit_sha(), full_name, default_branch, "Initial commit", {}, None)
        repo.commits[root.sha] = root
        repo.refs[f"refs/heads/{default_branch}"] = root.sha
        self.repos[full_name.lower()] = repo
        return repo

    def add_issue(
        self, full_name: str, title: str = "Issue", body: str = "", labels: tuple[str, ...] = ()
    ) -> int:
        """Open a plain issue (not a pull request); returns its number."""
        return open_issue(self.repos[full_name.lower()], title, body, labels)

    def set_pull(
        self,
        full_name: str,
        number: int,
        head_sha: str,
        base_sha: str,
        labels: tuple[str, ...] | None = None,
    ) -> None:
        """Make issue ``number`` a pull request at these commits (of a local repository)."""
        issue = self.repos[full_name.lower()].issues[number]
        if labels is not None:
            issue["labels"] = list(labels)
        issue["pull"] = {
            "head": "feature",
            "base": self.repos[full_name.lower()].default_branch,
            "draft": False,
            "head_sha": head_sha,
            "base_sha": base_sha,
        }

    def set_permission(
        self, full_name: str, login: str, role: str, legacy: str | None = None
    ) -> None:
        """Make ``login`` a collaborator with ``role`` (admin, maintain, write, triage,
        read, or a custom role's name with the ``legacy`` permission its base maps to)."""
        self.repos[full_name.lower()].permissions[login.lower()] = (role, legacy)

    def labels(self, full_name: str, number: int) -> list[str]:
        return list(self.repos[full_name.lower()].issues[number].get("labels", []))

    def files(self, full_name: str, branch: str | None = None) -> dict[str, bytes]:
        """The file tree at the tip of ``branch`` (the default branch when omitted)."""
        repo = self.repos[full_name.lower()]
        return dict(repo.commits[resolve(repo, branch or repo.default_branch)].tree)

    def fail_next(
        self,
        method: str,
        path_regex: str,
        status: int,
        times: int = 1,
        headers: dict[str, str] | None = None,
        body: Any = None,
        after: bool = False,
        message: str | None = None,
    ) -> None:
        """Answer the next ``times`` matching requests with ``status`` instead of serving them.

        ``path_regex`` is searched in the path (without query). ``body`` defaults to GitHub's
        error shape with ``message`` (default: the status phrase); a 403 with
        ``x-ratelimit-remaining: 0`` gets GitHub's rate-limit message, which is what PyGithub
        raises ``RateLimitExceededException`` on. ``after=True`` serves the request first (a
        comment is created, a file written) and then answers with the fault, as GitHub does
        when a proxy times out after the work was done.
        """
        headers = dict(headers or {})
        if body is None:
            limited = status in (403, 429) and headers.get("x-ratelimit-remaining") == "0"
            message = "API rate limit exceeded for user ID 1." if limited else message
            body = api.error_body(status, message or HTTPStatus(status).phrase)
        fault = Fault(method.upper(), re.compile(path_regex), status, times, headers, body, after)
        with self._lock:
            self._faults.append(fault)

    def assert_no_violations(self) -> None:
        """Fail when any traffic disagreed with GitHub's OpenAPI description."""
        assert not self.violations, "OpenAPI violations:\n" + "\n".join(map(str, self.violations))

    # -- serving ---------------------------------------------------------------------------

    def handle(
        self, method: str, target: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """Serve one request: record it, check it, answer it, check the answer."""
        split = urlsplit(target)
        path, query = split.path, parse_qs(split.query, keep_blank_values=True)
        auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        scheme, _, token = auth.partition(" ")
        token = token.strip() if scheme.lower() in ("token", "bearer") and token.strip() else None
        shown = {k: "<redacted>" if k.lower() == "authorization" else v for k, v in headers.items()}
        with self._lock:
            try:
                payload = json.loads(raw) if raw.strip() else None
            except ValueError:
                payload = raw.decode(errors="replace")
            request = RecordedRequest(method, path, query, payload, shown, token, raw)
            self.requests.append(request)
            self.violations += api.check_request(request)
            try:
                if not isinstance(payload, dict | None):
                    raise ApiError(400, "Problems parsing JSON")
                status, body, extra = self._dispatch(method, path, query, payload or {}, token)
            except ApiError as error:
                status, body, extra = error.status, error.body, {}
            except Exception as error:  # a bug in the fake: answer 500, fail the test later
                self.violations.append(Violation("server", method, path, 500, repr(error)))
                status, body, extra = 500, api.error_body(500, "Server Error"), {}
            out = b"" if status == 204 else json.dumps(body).encode()
            given = {key.lower() for key in extra}
            out_headers = api.rate_headers(len(self.requests))
            out_headers = {k: v for k, v in out_headers.items() if k.lower() not in given} | extra
            if out:
                out_headers["Content-Type"] = "application/json; charset=utf-8"
            self.violations += api.check_response(request, status, out_headers, out, self.url)
        return status, out_headers, out

    def _dispatch(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, token: str | None
    ) -> Answer:
        if self.token is not None and token != self.token:
            raise ApiError(401, "Requires authentication" if token is None else "Bad credentials")
        for fault in self._faults:
            if fault.method == method and fault.pattern.search(path):
                fault.times -= 1
                if fault.times <= 0:
                    self._faults.remove(fault)
                if fault.after:
                    self._route(method, path, query, body)
                return fault.status, fault.body, fault.headers
        return self._route(method, path, query, body)


class _Handler(BaseHTTPRequestHandler):
    """Reads one request, hands it to the ``FakeGitHub``, writes the answer."""

    fake: FakeGitHub
    protocol_version = "HTTP/1.1"  # keep-alive, as PyGithub's session expects
    disable_nagle_algorithm = True  # headers and body are two writes: avoid 40 ms stalls
    timeout = 5  # idle keep-alive connections end, and their threads with them

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        status, headers, body = self.fake.handle(self.command, self.path, dict(self.headers), raw)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve  # noqa: N815 (stdlib's names)

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: the log is ``FakeGitHub.requests``, and tokens stay out of test output."""


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    """A started server (token ``t``, repo ``octo-org/ci-bench``); fails on any violation."""
    with FakeGitHub() as server:
        yield server
        server.assert_no_violations()
