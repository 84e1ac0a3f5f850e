"""A real HTTP server on localhost that speaks enough of GitHub's REST API for ci-bench.

Tests point PyGithub at ``FakeGitHub.url`` (its ``base_url``) instead of mocking it, so the
client's URL building, pagination, retries and error mapping run as in production. State
lives in memory; every request is recorded and all traffic is checked against GitHub's
OpenAPI description (``tests/harness/github_openapi.py``), so drift shows up in ``violations``.

To share the fixture across a test folder, put in its ``conftest.py``::

    from tests.harness.github_server import fake_github  # noqa: F401
"""

from __future__ import annotations

import base64
import functools
import hashlib
import itertools
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from tests.harness import github_openapi as api
from tests.harness.github_openapi import ApiError, RecordedRequest, Shapes, Violation, blob_sha, now

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
    # A collaborator's permission (admin, write, read); anyone else has none.
    permissions: dict[str, str] = field(default_factory=dict)


@dataclass
class _Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    times: int
    headers: dict[str, str]
    body: Any
    after: bool  # serve the request (state changes), then answer with the fault


class FakeGitHub:
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
        self._faults: list[_Fault] = []
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
        repo = self.repos[full_name.lower()]
        number = len(repo.issues) + 1
        repo.issues[number] = {
            "title": title,
            "body": body,
            "created_at": now(),
            "pull": None,
            "labels": list(labels),
        }
        return number

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

    def set_permission(self, full_name: str, login: str, permission: str) -> None:
        """Make ``login`` a collaborator with ``permission`` (admin, write or read)."""
        self.repos[full_name.lower()].permissions[login.lower()] = permission

    def labels(self, full_name: str, number: int) -> list[str]:
        return list(self.repos[full_name.lower()].issues[number].get("labels", []))

    def files(self, full_name: str, branch: str | None = None) -> dict[str, bytes]:
        """The file tree at the tip of ``branch`` (the default branch when omitted)."""
        repo = self.repos[full_name.lower()]
        return dict(repo.commits[_resolve(repo, branch or repo.default_branch)].tree)

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
        fault = _Fault(method.upper(), re.compile(path_regex), status, times, headers, body, after)
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

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Answer:
        for verb, pattern, route in _ROUTES:
            match = pattern.match(path)
            if verb == method and match:
                args = {k: unquote(v) for k, v in match.groupdict().items()}
                repo = self.repos.get(f"{args.pop('owner', '')}/{args.pop('repo', '')}".lower())
                if repo is None and pattern.pattern.startswith(_REPO):
                    raise ApiError(404, "Not Found")
                # ``repo`` is None only for /user and /rate_limit, whose routes never read it.
                return getattr(self, route)(_Call(repo, args, query, body))  # type: ignore[arg-type]
        raise ApiError(404, "Not Found")

    def _commit_sha(self) -> str:
        return hashlib.sha1(f"commit {next(self._ids)}".encode()).hexdigest()

    # -- bodies from state -----------------------------------------------------------------

    def _repo_json(self, repo: Repo) -> dict[str, Any]:
        return self._shapes.repository(repo.full_name, repo.default_branch, len(repo.issues))

    def _pull_json(self, repo: Repo, number: int) -> dict[str, Any]:
        issue = repo.issues[number]
        # A test's pull request may name its commits directly (they live in a local git
        # repository, not in the fake's own history).
        shas = {
            side: issue["pull"].get(f"{side}_sha") or _resolve(repo, issue["pull"][side])
            for side in ("head", "base")
        }
        repo_json = self._repo_json(repo)
        return self._shapes.pull(repo.full_name, number, issue, shas, repo_json, self.login)

    def _comment_json(self, repo: Repo, comment_id: int) -> dict[str, Any]:
        comment = repo.comments[comment_id]
        on_pull = repo.issues[comment["issue"]]["pull"] is not None
        # A test may set "user" to stand for a comment written by another account.
        author = comment.get("user", self.login)
        return self._shapes.comment(repo.full_name, comment_id, comment, on_pull, author)

    # -- routes, named in _ROUTES ----------------------------------------------------------

    def _get_repo(self, c: _Call) -> Answer:
        return 200, self._repo_json(c.repo), {}

    def _get_issue(self, c: _Call) -> Answer:
        n = c.issue()
        count = sum(comment["issue"] == n for comment in c.repo.comments.values())
        return 200, self._shapes.issue(c.name, n, c.repo.issues[n], count, self.login), {}

    def _list_comments(self, c: _Call) -> Answer:
        """One page of comments, with the RFC 5988 ``Link`` header PyGithub paginates by."""
        n = c.issue()
        ids = [i for i, x in sorted(c.repo.comments.items()) if x["issue"] == n]
        here = f"{self.url}/repos/{c.name}/issues/{n}/comments"
        ids, links = self._shapes.paginate(ids, c.query, here)
        return 200, [self._comment_json(c.repo, i) for i in ids], links

    def _create_comment(self, c: _Call) -> Answer:
        n = c.issue()
        if not isinstance(c.body.get("body"), str):
            raise ApiError(422, "Validation Failed")
        comment_id, stamp = next(self._ids), now()
        comment = {"issue": n, "body": c.body["body"], "created_at": stamp, "updated_at": stamp}
        c.repo.comments[comment_id] = comment
        data = self._comment_json(c.repo, comment_id)
        return 201, data, {"Location": data["url"]}

    def _get_comment(self, c: _Call) -> Answer:
        return 200, self._comment_json(c.repo, c.comment()), {}

    def _edit_comment(self, c: _Call) -> Answer:
        c.repo.comments[c.comment()].update(body=c.body.get("body", ""), updated_at=now())
        return 200, self._comment_json(c.repo, c.comment()), {}

    def _delete_comment(self, c: _Call) -> Answer:
        del c.repo.comments[c.comment()]
        return 204, None, {}

    def _remove_label(self, c: _Call) -> Answer:
        """DELETE .../labels/{name}: 200 with the labels left, 404 if it was not there."""
        labels = c.repo.issues[c.issue()].setdefault("labels", [])
        name = c.args["name"]
        if name not in labels:
            raise ApiError(404, "Label does not exist")
        labels.remove(name)
        return 200, [self._label_json(c.repo, label) for label in labels], {}

    def _label_json(self, repo: Repo, name: str) -> dict[str, Any]:
        number = sum(ord(ch) for ch in name)
        return {
            "id": number,
            "node_id": f"LA_{number}",
            "url": f"{self.url}/repos/{repo.full_name}/labels/{name}",
            "name": name,
            "description": None,
            "color": "ededed",
            "default": False,
        }

    def _get_pull(self, c: _Call) -> Answer:
        return 200, self._pull_json(c.repo, c.issue(pull=True)), {}

    def _list_pulls(self, c: _Call) -> Answer:
        """Open pull requests (all the fake has), filtered by ``head`` (owner:branch), ``base``."""
        head, base = c.param("head", ""), c.param("base", "")
        owner = c.name.split("/")[0]
        numbers = [
            n
            for n, i in sorted(c.repo.issues.items())
            if i["pull"]
            and (not head or head == f"{owner}:{i['pull']['head']}")
            and (not base or base == i["pull"]["base"])
            and c.param("state", "open") in ("open", "all")
        ]
        here = f"{self.url}/repos/{c.name}/pulls"
        numbers, links = self._shapes.paginate(numbers, c.query, here)
        return 200, [self._pull_json(c.repo, n) for n in numbers], links

    def _create_pull(self, c: _Call) -> Answer:
        head, base = c.body.get("head", "").split(":")[-1], c.body.get("base", "")
        for side, ref in (("head", head), ("base", base)):
            if f"refs/heads/{ref}" not in c.repo.refs:
                error = {"resource": "PullRequest", "field": side, "code": "invalid"}
                raise ApiError(422, "Validation Failed", errors=[error])
        pulls = [
            (i["pull"]["head"], i["pull"]["base"]) for i in c.repo.issues.values() if i["pull"]
        ]
        if (head, base) in pulls:
            message = f"A pull request already exists for {c.name.split('/')[0]}:{head}."
            error = {"resource": "PullRequest", "code": "custom", "message": message}
            raise ApiError(422, "Validation Failed", errors=[error])
        number = self.add_issue(c.name, c.body.get("title", ""), c.body.get("body") or "")
        draft = bool(c.body.get("draft"))
        c.repo.issues[number]["pull"] = {"head": head, "base": base, "draft": draft}
        data = self._pull_json(c.repo, number)
        return 201, data, {"Location": data["url"]}

    def _get_contents(self, c: _Call) -> Answer:
        """A file with its content, or a folder's listing (files and sub-folders)."""
        ref, path = c.param("ref", c.repo.default_branch), c.args["path"].strip("/")
        tree = c.repo.commits[_resolve(c.repo, ref)].tree
        if path in tree:
            return 200, self._shapes.file(c.name, path, blob_sha(tree[path]), tree[path], ref), {}
        prefix = path + "/"
        children = sorted(
            {prefix + p[len(prefix) :].split("/")[0] for p in tree if p.startswith(prefix)}
        )
        if not children:
            raise ApiError(404, "Not Found")
        listing = [
            self._shapes.content(c.name, p, blob_sha(tree[p]), len(tree[p]), ref)
            if p in tree  # else a sub-folder, with a made-up tree sha
            else self._shapes.content(c.name, p, blob_sha(p.encode()), 0, ref, kind="dir")
            for p in children
        ]
        return 200, listing, {}

    def _put_contents(self, c: _Call) -> Answer:
        """Create (201) or update (200) one file, as a new commit on ``branch``."""
        branch, path = c.body.get("branch") or c.repo.default_branch, c.args["path"]
        if f"refs/heads/{branch}" not in c.repo.refs:
            raise ApiError(404, f"Branch {branch} not found")
        try:
            data = base64.b64decode(c.body.get("content", ""), validate=True)
        except ValueError as error:
            raise ApiError(422, "content is not valid Base64") from error
        head = c.repo.commits[c.repo.refs[f"refs/heads/{branch}"]]
        current = head.tree.get(path)
        if current is not None and "sha" not in c.body:
            raise ApiError(422, 'Invalid request.\n\n"sha" wasn\'t supplied.')
        # A sha naming a file that has since changed, or gone, is stale: GitHub answers 409.
        if "sha" in c.body and (current is None or blob_sha(current) != c.body["sha"]):
            raise ApiError(409, f"{path} does not match {c.body['sha']}")
        tree, message = {**head.tree, path: data}, c.body.get("message", "")
        commit = Commit(self._commit_sha(), c.name, branch, message, tree, head.sha)
        c.repo.commits[commit.sha] = commit
        c.repo.refs[f"refs/heads/{branch}"] = commit.sha
        self.commits.append(commit)
        content = self._shapes.content(c.name, path, blob_sha(data), len(data), branch)
        answer = self._shapes.file_commit(c.name, content, commit.sha, head.sha, message)
        return (201 if current is None else 200), answer, {}

    def _get_ref(self, c: _Call) -> Answer:
        ref = f"refs/{c.args['ref']}"
        if ref not in c.repo.refs:
            raise ApiError(404, "Not Found")
        return 200, self._shapes.ref(c.name, ref, c.repo.refs[ref]), {}

    def _create_ref(self, c: _Call) -> Answer:
        ref, sha = c.body.get("ref", ""), c.body.get("sha", "")
        if not ref.startswith("refs/") or ref.count("/") < 2:
            raise ApiError(422, f"{ref} is not a valid ref name.")
        if ref in c.repo.refs:
            raise ApiError(422, "Reference already exists")
        if sha not in c.repo.commits:
            raise ApiError(422, "Object does not exist")
        c.repo.refs[ref] = sha
        data = self._shapes.ref(c.name, ref, sha)
        return 201, data, {"Location": data["url"]}

    def _permission(self, c: _Call) -> Answer:
        """A collaborator's permission; GitHub answers 404 for an account that is none."""
        login = c.args["username"]
        permission = c.repo.permissions.get(login.lower())
        if permission is None:
            raise ApiError(404, f"{login} is not a user")
        data = api.example(
            "repository-collaborator-permission-response-if-user-has-admin-permissions"
        )
        data = json.loads(json.dumps(data).replace('"octocat"', json.dumps(login)))
        data.update(permission=permission, role_name=permission)
        data["user"]["role_name"] = permission  # required by the schema; the example lacks it
        return 200, self._shapes.localize(data), {}

    def _get_user(self, c: _Call) -> Answer:
        return 200, self._shapes.private_user(self.login), {}

    def _rate_limit(self, c: _Call) -> Answer:
        return 200, self._shapes.localize(api.example("rate-limit-overview")), {}


@dataclass
class _Call:
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


def _resolve(repo: Repo, ref: str) -> str:
    """A commit sha from a branch name, a full ref or a sha; GitHub's 404 otherwise."""
    for candidate in (ref, f"refs/heads/{ref}", f"refs/tags/{ref}"):
        if candidate in repo.refs:
            return repo.refs[candidate]
    if ref in repo.commits:
        return ref
    raise ApiError(404, f"No commit found for the ref {ref}")


_REPO = r"^/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
_ISSUE, _COMMENT = r"/issues/(?P<number>\d+)", r"/issues/comments/(?P<comment_id>\d+)"
_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    (verb, re.compile(pattern + "$"), route)
    for verb, pattern, route in [
        ("GET", _REPO, "_get_repo"),
        ("GET", _REPO + _ISSUE, "_get_issue"),
        ("GET", _REPO + _ISSUE + "/comments", "_list_comments"),
        ("POST", _REPO + _ISSUE + "/comments", "_create_comment"),
        ("GET", _REPO + _COMMENT, "_get_comment"),
        ("PATCH", _REPO + _COMMENT, "_edit_comment"),
        ("DELETE", _REPO + _COMMENT, "_delete_comment"),
        ("DELETE", _REPO + _ISSUE + "/labels/(?P<name>[^/]+)", "_remove_label"),
        ("GET", _REPO + r"/pulls/(?P<number>\d+)", "_get_pull"),
        ("GET", _REPO + "/pulls", "_list_pulls"),
        ("POST", _REPO + "/pulls", "_create_pull"),
        ("GET", _REPO + "/contents/(?P<path>.+)", "_get_contents"),
        ("PUT", _REPO + "/contents/(?P<path>.+)", "_put_contents"),
        ("GET", _REPO + "/git/ref/(?P<ref>.+)", "_get_ref"),
        ("POST", _REPO + "/git/refs", "_create_ref"),
        ("GET", _REPO + "/collaborators/(?P<username>[^/]+)/permission", "_permission"),
        ("GET", "^/user", "_get_user"),
        ("GET", "^/rate_limit", "_rate_limit"),
    ]
]


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
