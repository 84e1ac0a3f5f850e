"""The dashboard's and ``history``'s commit links: the commit string is one path segment,
percent-encoded, whatever a results file put there."""

from __future__ import annotations

from ci_bench.report.history import commit_url, pr_url

REPO = "https://github.com/o/r"


def test_a_commit_link_encodes_the_commit_string_whole() -> None:
    sha = "a1b2c3d" + "e" * 33
    assert commit_url(REPO + "/", sha) == f"{REPO}/commit/{sha}"
    assert commit_url(REPO, "../../x?token=1#frag") == (
        f"{REPO}/commit/..%2F..%2Fx%3Ftoken%3D1%23frag"
    )
    assert commit_url(REPO, 'a" onclick="x') == f"{REPO}/commit/a%22%20onclick%3D%22x"
    assert commit_url(None, sha) is None


def test_a_pull_request_link_holds_its_number_only() -> None:
    assert pr_url(REPO, 12) == f"{REPO}/pull/12"
    assert pr_url(REPO, None) is None
    assert pr_url(None, 12) is None
