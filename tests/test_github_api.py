"""ci-bench's GitHub client and promotion against the fake GitHub, with GitHub's failures.

The faults are the ones the issue found in the deployed pipeline: a comment created but
answered 502, Actions refused permission to open pull requests, a protected branch that
answers 409 for ever, a ``Retry-After`` longer than the configured cap.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from ci_bench.errors import ExitCode
from ci_bench.github.api import ApiSettings, GitHubClient, GitHubError
from ci_bench.github.markers import marker
from ci_bench.github.promote import promote_through_api
from tests.harness.factories import case, results
from tests.harness.github_server import FakeGitHub

REPO = "octo-org/ci-bench"
TAG = marker("benchmark", "cpu:cpu")
# GitHub's own texts, as its API answers them.
ACTIONS_MAY_NOT_OPEN_PRS = "GitHub Actions is not permitted to create or approve pull requests."
RULE_VIOLATION = "Repository rule violations found\n\nChanges must be made through a pull request."
BASELINE = "baselines/matmul_v0.1.0.json"


@pytest.fixture
def server() -> Iterator[FakeGitHub]:
    with FakeGitHub(login="github-actions[bot]") as fake:
        yield fake
        fake.assert_no_violations()


def client(server: FakeGitHub, **settings: object) -> GitHubClient:
    fast = {"backoff": 0.01, "seconds_between_requests": 0, "seconds_between_writes": 0}
    return GitHubClient("t", server.url, REPO, ApiSettings(**{**fast, **settings}))  # type: ignore[arg-type]


def posts(server: FakeGitHub, suffix: str) -> int:
    return sum(r.method == "POST" and r.path.endswith(suffix) for r in server.requests)


def bodies(server: FakeGitHub) -> list[str]:
    return [c["body"] for c in server.repos[REPO].comments.values()]


def test_a_comment_created_but_answered_502_is_found_not_created_twice(server):
    number = server.add_issue(REPO, "PR")
    server.fail_next("POST", r"/issues/\d+/comments$", 502, after=True)

    action, url = client(server).upsert_comment(number, TAG, "first run")

    assert action == "created"
    assert bodies(server) == [f"{TAG}\nfirst run"]
    assert posts(server, "/comments") == 1  # the 502 was not blindly retried
    assert url.endswith(f"#issuecomment-{next(iter(server.repos[REPO].comments))}")
    assert client(server).upsert_comment(number, TAG, "second run")[0] == "updated"
    assert bodies(server) == [f"{TAG}\nsecond run"]


def test_a_create_that_really_failed_is_made_again_after_looking(server):
    number = server.add_issue(REPO, "PR")
    server.fail_next("POST", r"/issues/\d+/comments$", 503)

    action, _ = client(server).upsert_comment(number, TAG, "body")

    assert action == "created"
    assert bodies(server) == [f"{TAG}\nbody"]
    lists = [r for r in server.requests if r.method == "GET" and r.path.endswith("/comments")]
    assert posts(server, "/comments") == 2
    assert len(lists) == 2


def test_a_comment_that_keeps_failing_is_one_github_error(server):
    number = server.add_issue(REPO, "PR")
    server.fail_next("POST", r"/issues/\d+/comments$", 502, times=10)
    with pytest.raises(GitHubError, match=r"HTTP 502") as raised:
        client(server, retries=2).upsert_comment(number, TAG, "body")
    assert raised.value.exit_code == ExitCode.GITHUB
    assert posts(server, "/comments") == 3
    assert bodies(server) == []


def test_a_rate_limited_post_is_retried_because_github_did_not_act(server):
    number = server.add_issue(REPO, "PR")
    limited = {"x-ratelimit-remaining": "0", "Retry-After": "0"}
    server.fail_next("POST", r"/issues/\d+/comments$", 403, headers=limited)
    assert client(server).upsert_comment(number, TAG, "body")[0] == "created"
    assert posts(server, "/comments") == 2
    assert len(bodies(server)) == 1


def test_retry_after_beyond_the_cap_fails_at_once_instead_of_sleeping(server):
    number = server.add_issue(REPO, "PR")
    server.fail_next(
        "GET",
        r"/issues/\d+/comments$",
        403,
        headers={"Retry-After": "40"},
        message="You have exceeded a secondary rate limit.",
    )
    with pytest.raises(GitHubError, match=r"asked to wait 40 s, more than max-rate-limit-wait"):
        client(server, max_rate_limit_wait=1).upsert_comment(number, TAG, "body")
    assert len(server.requests) == 1  # no retry, so no 40 s sleep before one


def test_retry_after_within_the_cap_is_waited_and_retried(server):
    number = server.add_issue(REPO, "PR")
    server.fail_next("GET", r"/issues/\d+/comments$", 429, headers={"Retry-After": "1"})
    assert client(server, max_rate_limit_wait=1).upsert_comment(number, TAG, "b")[0] == "created"


def release(kernels: tuple[str, ...] = ("matmul",)):
    return results([case(f"{k}/B1-M128-K128-N128/float32") for k in kernels])


def test_promotion_writes_no_hostname_and_no_cache_path(server):
    run = release()
    settings = run.meta.settings.model_copy(update={"compilation_cache": "/home/r/_tool/jax"})
    run = run.model_copy(update={"meta": run.meta.model_copy(update={"settings": settings})})
    promote_through_api(client(server), run, "v0.1.0", "baselines", "commit")
    entry = json.loads(server.files(REPO)[BASELINE])["entries"][0]
    assert entry["device"]["hostname"] == ""
    assert entry["settings"]["compilation_cache"] is None


def test_a_refused_pull_request_quotes_github_and_a_rerun_opens_it(server):
    server.fail_next("POST", r"/pulls$", 403, message=ACTIONS_MAY_NOT_OPEN_PRS)
    with pytest.raises(GitHubError) as refused:
        promote_through_api(client(server), release(), "v0.1.0", "baselines", "pull-request")
    text = str(refused.value)
    assert ACTIONS_MAY_NOT_OPEN_PRS in text
    assert "HTTP 403" in text
    assert "ci-bench/baselines-v0.1.0" in text
    assert "rerun" in text
    assert refused.value.exit_code == ExitCode.GITHUB
    assert BASELINE in server.files(REPO, "ci-bench/baselines-v0.1.0")  # the branch was written

    lines = promote_through_api(client(server), release(), "v0.1.0", "baselines", "pull-request")

    assert f"unchanged: {BASELINE} on ci-bench/baselines-v0.1.0" in lines[0]
    assert lines[-1].startswith("pull request: http")
    pulls = [i for i in server.repos[REPO].issues.values() if i["pull"]]
    assert [p["pull"]["head"] for p in pulls] == ["ci-bench/baselines-v0.1.0"]

    again = promote_through_api(client(server), release(), "v0.1.0", "baselines", "pull-request")
    assert again[-1].startswith("pull request already open: http")
    assert posts(server, "/pulls") == 2  # the refused one and the one that opened


def test_a_merged_promotion_is_unchanged_and_opens_nothing(server):
    promote_through_api(client(server), release(), "v0.1.0", "baselines", "commit")
    lines = promote_through_api(client(server), release(), "v0.1.0", "baselines", "pull-request")
    assert lines == [f"unchanged: {BASELINE} on main (cpu:cpu:Test CPU 9000, v0.1.0)"]
    assert posts(server, "/pulls") == 0
    assert posts(server, "/git/refs") == 0


def test_a_protected_branch_reports_githubs_message_and_the_way_out(server):
    server.fail_next("PUT", r"/contents/", 409, times=2, message=RULE_VIOLATION)
    with pytest.raises(GitHubError) as refused:
        promote_through_api(client(server), release(), "v0.1.0", "baselines", "commit")
    text = str(refused.value)
    assert "Repository rule violations found Changes must be made through a pull request." in text
    assert 'promote-via = "pull-request"' in text
    assert "\n" not in text
    assert BASELINE not in server.files(REPO)
