"""Event payloads from GitHub's own webhook examples, parsed into typed events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_bench.errors import InputError
from ci_bench.github.context import (
    PUBLIC_API,
    Dispatch,
    PullRequest,
    Release,
    WorkflowRun,
    load_context,
    parse_event,
    parse_tag,
)
from ci_bench.github.outputs import annotations, append_summary, write_outputs
from tests.harness.factories import case, results

EVENTS = Path(__file__).parent / "fixtures" / "events"


def payload(name: str) -> dict:
    return json.loads((EVENTS / name).read_text())


def test_pull_request_events():
    for name, action in (
        ("pull_request_opened.json", "opened"),
        ("pull_request_synchronize.json", "synchronize"),
    ):
        event = parse_event("pull_request", payload(name), None)
        assert isinstance(event, PullRequest)
        assert event.number == 2
        assert event.action == action
        assert event.head_sha == "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
        assert not event.from_fork


def test_a_pull_request_from_a_fork_is_recognised():
    data = payload("pull_request_opened.json")
    data["pull_request"]["head"]["repo"]["full_name"] = "someone/fork"
    event = parse_event("pull_request", data, None)
    assert event.from_fork


def test_dispatch_inputs_are_typed():
    data = payload("workflow_dispatch.json")
    data["inputs"] = {
        "kernels": "matmul, gla",
        "profile": "smoke",
        "repeats": "7",
        "baseline_version": "0.1.0",
        "fail_on": "error,noisy",
    }
    event = parse_event("workflow_dispatch", data, None)
    assert event == Dispatch(
        kernels=["matmul", "gla"],
        profile="smoke",
        repeats=7,
        baseline_version="0.1.0",
        fail_on="error,noisy",
        default_branch="main",  # the example repository's, the A/B base when none is given
    )
    assert parse_event("workflow_dispatch", payload("workflow_dispatch.json"), None) == Dispatch(
        default_branch="main"
    )
    data["inputs"]["repeats"] = "many"
    with pytest.raises(InputError, match="repeats"):
        parse_event("workflow_dispatch", data, None)


def test_tag_pushes_and_releases_name_what_to_promote():
    assert parse_event("push", payload("push_tag.json"), None) == Release("v0.2.0", None, "0.2.0")
    assert parse_tag("matmul-v0.2.0") == Release("matmul-v0.2.0", "matmul", "0.2.0")
    assert parse_tag("gla-v0.2.0-rc1") == Release("gla-v0.2.0-rc1", "gla", "0.2.0-rc1")
    with pytest.raises(InputError, match="neither"):
        parse_tag("nightly")
    release = payload("release_published.json")
    release["release"]["tag_name"] = "v1.0.0"
    assert parse_event("release", release, None) == Release("v1.0.0", None, "1.0.0")
    branch_push = {**payload("push_tag.json"), "ref": "refs/heads/main"}
    assert parse_event("push", branch_push, None) is None


def test_pull_request_actions_without_new_code_are_ignored():
    closed = {**payload("pull_request_opened.json"), "action": "closed"}
    assert parse_event("pull_request", closed, None) is None


def test_workflow_run_event():
    event = parse_event("workflow_run", payload("workflow_run_completed.json"), None)
    assert isinstance(event, WorkflowRun)
    assert event.conclusion == "success"
    assert event.pull_numbers == []


def test_a_broken_payload_is_an_input_error():
    with pytest.raises(InputError, match="pull_request event payload"):
        parse_event("pull_request", {"action": "opened", "pull_request": {}}, None)


def test_context_reads_the_environment_and_defaults_to_the_public_api(tmp_path):
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload("pull_request_opened.json")))
    env = {
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(path),
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_TOKEN": "secret",
        "GITHUB_RUN_ID": "9",
    }
    context = load_context(env)
    assert context.api_url == PUBLIC_API
    assert context.run_url == "https://github.com/o/r/actions/runs/9"
    assert "secret" not in repr(context)
    ghes = load_context({**env, "GITHUB_API_URL": "https://ghe.example/api/v3/"})
    assert ghes.api_url == "https://ghe.example/api/v3"
    assert load_context({}).event is None
    path.write_text("{")
    with pytest.raises(InputError, match=r"event\.json: invalid JSON"):
        load_context(env)


def test_outputs_use_delimiters_and_summaries_append(tmp_path):
    out = tmp_path / "out"
    write_outputs(out, {"verdict": "pass", "multi": "a\nb"})
    lines = out.read_text().splitlines()
    assert lines[0].startswith("verdict<<ghadelimiter_")
    assert lines[1] == "pass"
    assert lines[2] == lines[0].split("<<")[1]
    assert lines[4:6] == ["a", "b"]
    summary = tmp_path / "summary"
    append_summary(summary, "one")
    append_summary(summary, "two")
    assert summary.read_text() == "one\n\ntwo\n\n"


def test_annotations_escape_workflow_command_syntax():
    from ci_bench.judge.compare import compare
    from ci_bench.schema import FailPolicy, Thresholds
    from ci_bench.store.baselines import BaselineFile, Lookup, entry_from_results

    cid = "matmul/B1-M128-K128-N128/float32"
    base = results([case(cid, 1.0)])
    entry = entry_from_results(base, "matmul", base.meta.started_at, None)
    doc = BaselineFile(kernel="matmul", version="0.1.0", entries=[entry])
    report = compare(
        results([case(cid, 2.0)]),
        {"matmul": Lookup("matmul", "0.1.0", None, doc, None)},
        Thresholds(),
        FailPolicy(),
    )
    (line,) = annotations(report)
    assert line.startswith(
        "::error title=ci-bench regression%3A matmul/B1-M128-K128-N128/float32::"
    )
    assert "+100.0%25 mean, significantly slower" in line  # "%" escaped as GitHub requires


def test_the_regressions_output_counts_memory_regressions_too(tmp_path):
    from pathlib import Path

    from ci_bench.github.outputs import report_outputs
    from ci_bench.judge.compare import compare
    from ci_bench.schema import FailPolicy, Thresholds
    from ci_bench.store.baselines import BaselineFile, Lookup, entry_from_results

    cid = "matmul/B1-M128-K128-N128/float32"
    base = results([case(cid, 1.0, peak_bytes=1000)])
    entry = entry_from_results(base, "matmul", base.meta.started_at, None)
    doc = BaselineFile(kernel="matmul", version="0.1.0", entries=[entry])
    lookup = {"matmul": Lookup("matmul", "0.1.0", None, doc, None)}
    report = compare(results([case(cid, 1.0, peak_bytes=2000)]), lookup, Thresholds(), FailPolicy())
    outputs = report_outputs(report, Path("r.json"))
    assert outputs["verdict"] == "regression"
    assert outputs["regressions"] == "1"
