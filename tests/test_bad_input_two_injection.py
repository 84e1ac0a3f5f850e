"""Issue 18's reproductions, readers (see tests/test_bad_input_two.py): injection through
artifacts, events and links into the comment and the reports.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_bench.store.files import dump_model
from tests.harness import bad_input
from tests.harness.bad_input import ID
from tests.harness.factories import case, results
from tests.harness.inproc import assert_one_line_error, call

results_file = bad_input.results_file


# --- injection ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("run_url", "https://github.com/o/r/actions/runs/1)<img src=x onerror=alert(1)>"),
        ("run_url", "javascript:alert(1)"),
        ("head_sha", "<img src=x>"),
        ("head_sha", "`](https://evil.example)"),
    ],
)
def test_a_crafted_artifact_cannot_put_markup_in_the_comment_footer(tmp_path, field, value):
    """The comment job refuses the report before any API call (exit 2, one line)."""
    seeds = REPO_FIXTURES / "events" / "pull_request_opened.json"
    report = _report(tmp_path)
    report[field] = value
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    (artifact / "report.json").write_text(json.dumps(report))
    env = {
        "GITHUB_EVENT_NAME": "pull_request_target",
        "GITHUB_EVENT_PATH": str(seeds),
        "GITHUB_REPOSITORY": "octo/kernels",
        "GITHUB_TOKEN": "t",
        "GITHUB_API_URL": "http://127.0.0.1:9",  # never reached
    }
    outcome = call("comment", "--report-dir", str(artifact), cwd=tmp_path, env=env)
    assert_one_line_error(outcome, "report.json", field, "not a")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("by", "x @everyone"),
        ("by", "<img src=x onerror=alert(1)>"),
        ("head_sha", "`](https://evil.example)"),
        ("label", "a" * 51),
    ],
)
def test_a_crafted_acceptance_in_the_artifact_is_refused(tmp_path, field, value):
    """ "Accepted by @<by>" is rendered from the artifact: a login, a commit, a label only."""
    seeds = REPO_FIXTURES / "events" / "pull_request_opened.json"
    report = _report(tmp_path)
    report["acceptance"] = {"label": "benchmark-accept", "by": "octo", "head_sha": "a" * 40}
    report["acceptance"][field] = value
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    (artifact / "report.json").write_text(json.dumps(report))
    env = {
        "GITHUB_EVENT_NAME": "pull_request_target",
        "GITHUB_EVENT_PATH": str(seeds),
        "GITHUB_REPOSITORY": "octo/kernels",
        "GITHUB_TOKEN": "t",
        "GITHUB_API_URL": "http://127.0.0.1:9",  # never reached
    }
    outcome = call("comment", "--report-dir", str(artifact), cwd=tmp_path, env=env)
    assert_one_line_error(outcome, "report.json", f"acceptance.{field}")


def test_an_event_sender_that_is_not_a_login_is_one_line(tmp_path):
    event = json.loads((REPO_FIXTURES / "events" / "pull_request_opened.json").read_text())
    event["sender"]["login"] = "<b>x</b> @everyone"
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    env = {"GITHUB_EVENT_NAME": "pull_request_target", "GITHUB_EVENT_PATH": str(path)}
    res = tmp_path / "r.json"
    res.write_text(dump_model(results([case(ID)])))
    args = ["ci", "--results", str(res), "--mode", "baseline", "--no-comment", "--out-dir", "o"]
    outcome = call(*args, cwd=tmp_path, env={**env, "GITHUB_REPOSITORY": "octo/kernels"})
    assert_one_line_error(outcome, "sender.login", "not a GitHub login")


REPO_FIXTURES = Path(__file__).parent / "fixtures"


def _report(tmp_path: Path) -> dict:
    res = tmp_path / "r.json"
    res.write_text(dump_model(results([case(ID)])))
    out = tmp_path / "report.json"
    outcome = call("compare", str(res), "-o", str(out), cwd=tmp_path)
    assert outcome.code == 0, outcome.err
    return json.loads(out.read_text())


@pytest.mark.parametrize("url", ["javascript:alert(1)//", "ftp://x/y", "https://x/<b>y</b>"])
def test_dashboard_links_are_http_only(tmp_path, results_file, url):
    site = ["site", "--results", str(results_file), "--out", str(tmp_path / "s")]
    outcome = call(*site, "--repo-url", url, cwd=tmp_path)
    assert_one_line_error(outcome, "--repo-url", "not a plain http(s) URL")
    env = {"GITHUB_SERVER_URL": url, "GITHUB_REPOSITORY": "octo/kernels"}
    outcome = call(*site, cwd=tmp_path, env=env)
    assert_one_line_error(outcome, "GITHUB_SERVER_URL", "not an http(s) URL")
    outcome = call(*site, cwd=tmp_path, env={"GITHUB_REPOSITORY": "octo/<b>x</b>"})
    assert_one_line_error(outcome, "GITHUB_REPOSITORY", "not OWNER/REPO")


def test_bare_urls_in_untrusted_text_do_not_autolink():
    from ci_bench.report.escape import ZWJ, md_inline

    text = md_inline("see https://evil.example/x or www.evil.example, mail a@evil.example")
    for bare in ("https://", "www.", "@evil"):
        assert bare not in text
    assert (
        text.replace(ZWJ, "")
        == "see https://evil.example/x or www.evil.example, mail a@evil.example"
    )
