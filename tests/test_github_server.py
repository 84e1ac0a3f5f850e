"""The fake GitHub server, driven by real PyGithub: what later tests of ci-bench rely on.

Each scenario ends with ``assert_no_violations`` (in the ``fake_github`` fixture), so the
fake's answers are known to match GitHub's OpenAPI description, not only PyGithub.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import github
import pytest
from urllib3.util import Retry

from tests.harness import github_server
from tests.harness.github_openapi import blob_sha
from tests.harness.github_server import FakeGitHub

fake_github = github_server.fake_github  # the shared fixture, used here by name

REPO = "octo-org/ci-bench"
EVENTS = Path(__file__).parent / "fixtures" / "events"


def client(server: FakeGitHub, token: str | None = "t", **kwargs: Any) -> github.Github:
    """PyGithub as ci-bench uses it, without throttling or retries unless asked."""
    auth = github.Auth.Token(token) if token else None
    options = {"seconds_between_requests": 0, "seconds_between_writes": 0, "retry": None}
    return github.Github(auth=auth, base_url=server.url, **{**options, **kwargs})


def raw(server: FakeGitHub, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """A request PyGithub would never send, for checking the fake's own guard rails."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data=data, method=method)
    request.add_header("Authorization", "token t")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def test_comments_are_created_paginated_edited_and_deleted(fake_github: FakeGitHub) -> None:
    number = fake_github.add_issue(REPO, "Benchmarks")
    issue = client(fake_github, per_page=30).get_repo(REPO).get_issue(number)
    for i in range(75):
        issue.create_comment(f"comment {i}")

    fake_github.requests.clear()
    comments = list(issue.get_comments())

    assert [c.body for c in comments] == [f"comment {i}" for i in range(75)]
    pages = [r.query.get("page", ["1"])[0] for r in fake_github.requests]
    assert pages == ["1", "2", "3"]  # PyGithub followed rel="next" twice
    assert issue.get_comments().totalCount == 75  # read from rel="last"
    assert all(c.html_url.startswith(fake_github.url) for c in comments)

    comments[0].edit("edited")
    assert issue.get_comment(comments[0].id).body == "edited"
    comments[1].delete()
    with pytest.raises(github.UnknownObjectException):
        issue.get_comment(comments[1].id)
    assert issue.get_comments().totalCount == 74


def test_contents_create_update_and_conflict(fake_github: FakeGitHub) -> None:
    repo = client(fake_github).get_repo(REPO)
    path = "baselines/matmul_v0.1.0.json"
    with pytest.raises(github.UnknownObjectException):
        repo.get_contents(path)

    created = repo.create_file(path, "Add baseline", '{"ms": 1.0}\n')
    first_sha = created["content"].sha
    assert first_sha == blob_sha(b'{"ms": 1.0}\n')
    fetched = repo.get_contents(path, ref="main")
    assert fetched.decoded_content == b'{"ms": 1.0}\n'
    assert fetched.sha == first_sha

    updated = repo.update_file(path, "Update baseline", '{"ms": 0.9}\n', first_sha)
    assert updated["content"].sha == blob_sha(b'{"ms": 0.9}\n')

    with pytest.raises(github.GithubException) as stale:
        repo.update_file(path, "Stale update", '{"ms": 2.0}\n', first_sha)
    assert stale.value.status == 409
    with pytest.raises(github.GithubException) as exists:
        repo.create_file(path, "Create again", "x")
    assert exists.value.status == 422

    assert [c.message for c in fake_github.commits] == ["Add baseline", "Update baseline"]
    assert fake_github.files(REPO)[path] == b'{"ms": 0.9}\n'
    put = [r for r in fake_github.requests if r.method == "PUT"][1]
    assert (put.path, put.json["sha"]) == (f"/repos/{REPO}/contents/{path}", first_sha)


def test_folder_listing_and_missing_branch(fake_github: FakeGitHub) -> None:
    repo = client(fake_github).get_repo(REPO)
    for path in ("README.md", "baselines/a.json", "baselines/old/b.json"):
        repo.create_file(path, f"Add {path}", "{}")

    listing = repo.get_contents("baselines")
    assert [(item.type, item.path) for item in listing] == [
        ("file", "baselines/a.json"),
        ("dir", "baselines/old"),
    ]
    with pytest.raises(github.UnknownObjectException):
        repo.create_file("c.json", "m", "{}", branch="no-such-branch")
    with pytest.raises(github.GithubException) as no_ref:  # GitHub: "No commit found for ..."
        repo.get_contents("README.md", ref="no-such-branch")
    assert no_ref.value.status == 404


def test_commit_to_new_branch_then_open_pull_request(fake_github: FakeGitHub) -> None:
    repo = client(fake_github).get_repo(REPO)
    assert repo.default_branch == "main"
    main = repo.get_git_ref("heads/main")
    repo.create_git_ref("refs/heads/ci-bench/baselines", main.object.sha)
    repo.create_file("baselines/a.json", "Baseline", "{}", branch="ci-bench/baselines")

    pull = repo.create_pull(base="main", head="ci-bench/baselines", title="Update baselines")
    pull.create_issue_comment("Benchmark report")

    again = repo.get_pull(pull.number)
    assert (again.head.ref, again.base.ref, again.title) == (
        "ci-bench/baselines",
        "main",
        pull.title,
    )
    assert again.head.sha == fake_github.commits[-1].sha
    assert again.html_url.startswith(fake_github.url)
    assert [c.body for c in again.get_issue_comments()] == ["Benchmark report"]
    assert "baselines/a.json" not in fake_github.files(REPO)
    assert "baselines/a.json" in fake_github.files(REPO, "ci-bench/baselines")
    with pytest.raises(github.GithubException) as duplicate:
        repo.create_pull(base="main", head="ci-bench/baselines", title="Again")
    assert duplicate.value.status == 422


def test_user_and_rate_limit(fake_github: FakeGitHub) -> None:
    gh = client(fake_github)
    assert gh.get_user().login == "ci-bench-bot"
    assert gh.get_rate_limit().resources.core.limit == 5000


def test_requests_need_the_token(fake_github: FakeGitHub) -> None:
    with pytest.raises(github.GithubException) as missing:
        client(fake_github, token=None).get_repo(REPO)
    assert missing.value.status == 401
    with pytest.raises(github.BadCredentialsException):
        client(fake_github, token="wrong").get_repo(REPO)

    client(fake_github).get_repo(REPO)
    assert [r.token for r in fake_github.requests] == [None, "wrong", "t"]
    assert all(r.headers["Authorization"] == "<redacted>" for r in fake_github.requests[1:])
    assert "wrong" not in repr(fake_github.requests)


def test_fault_injection(fake_github: FakeGitHub) -> None:
    repo = client(fake_github).get_repo(REPO)
    fake_github.fail_next("POST", r"/issues/\d+/comments$", 502)
    number = fake_github.add_issue(REPO)
    issue = repo.get_issue(number)
    with pytest.raises(github.GithubException) as bad_gateway:
        issue.create_comment("lost")
    assert bad_gateway.value.status == 502
    issue.create_comment("kept")  # the fault was used up

    reset = str(int(time.time()) + 60)
    limited_headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}
    fake_github.fail_next("GET", r"/contents/", 403, headers=limited_headers)
    with pytest.raises(github.RateLimitExceededException) as limited:
        repo.get_contents("x.json")
    assert limited.value.headers["x-ratelimit-remaining"] == "0"

    fake_github.fail_next("PUT", r"/contents/", 409, times=2)
    for _ in range(2):
        with pytest.raises(github.GithubException) as conflict:
            repo.create_file("x.json", "m", "x")
        assert conflict.value.status == 409
    repo.create_file("x.json", "m", "x")


def test_client_retries_through_injected_faults(fake_github: FakeGitHub) -> None:
    retry = Retry(total=3, status_forcelist=[500, 502], backoff_factor=0, allowed_methods=None)
    repo = client(fake_github, retry=retry).get_repo(REPO)
    fake_github.fail_next("GET", r"/pulls/1$", 500)
    fake_github.fail_next("GET", r"/pulls/1$", 502)
    fake_github.requests.clear()
    with pytest.raises(github.UnknownObjectException):
        repo.get_pull(1)
    assert len(fake_github.requests) == 3  # 500, 502, then the real 404


def test_violations_are_collected() -> None:
    with FakeGitHub() as server:
        number = server.add_issue(REPO)
        status, body = raw(server, "POST", f"/repos/{REPO}/issues/{number}/comments", {"bdy": 1})
        assert status == 422
        assert body["documentation_url"].startswith("https://docs.github.com")
        status, body = raw(server, "GET", f"/repos/{REPO}/wiki")
        assert (status, body["message"]) == (404, "Not Found")
        server.fail_next("GET", "/user", 418)
        assert raw(server, "GET", "/user")[0] == 418
        server.fail_next("GET", "/rate_limit", 500, body={"url": "https://api.github.com/x"})
        assert raw(server, "GET", "/rate_limit")[0] == 500

        found = [(v.kind, v.path) for v in server.violations]
        assert found == [
            ("request", f"/repos/{REPO}/issues/{number}/comments"),
            ("request", f"/repos/{REPO}/wiki"),
            ("response", "/user"),
            ("response", "/rate_limit"),
        ]
        messages = [v.message for v in server.violations]
        assert "'body' is a required property" in messages[0]
        assert "Path not found" in messages[1]
        assert "Unknown response http status: 418" in messages[2]
        assert messages[3] == f"not on {server.url}: url=https://api.github.com/x"
        with pytest.raises(AssertionError, match="OpenAPI violations"):
            server.assert_no_violations()


@pytest.mark.parametrize(
    ("name", "key", "value"),
    [
        ("pull_request_opened", "action", "opened"),
        ("pull_request_synchronize", "action", "synchronize"),
        ("workflow_dispatch", "ref", "refs/heads/main"),
        ("push_tag", "ref", "refs/tags/v0.2.0"),
        ("release_published", "action", "published"),
        ("workflow_run_completed", "action", "completed"),
    ],
)
def test_event_fixtures(name: str, key: str, value: str) -> None:
    event = json.loads((EVENTS / f"{name}.json").read_text())
    assert event[key] == value
    assert "repository" in event
