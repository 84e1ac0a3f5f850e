"""The plan: which jobs run for an event, and each role's steps (pure, over real payloads)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from ci_bench.errors import InputError
from ci_bench.github.context import parse_event
from ci_bench.pipeline.plan import Gate, Step, acceptance_refusal, gate, plan_for
from ci_bench.schema import Acceptance

EVENTS = Path(__file__).parent / "fixtures" / "events"
BASE = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"  # the examples' base commit
HEAD = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"


def pr(
    file: str,
    *,
    fork: bool = False,
    label: str | None = None,
    sender: str | None = "octo",
    action: str | None = None,
):
    data: dict[str, Any] = copy.deepcopy(json.loads((EVENTS / file).read_text()))
    if fork:
        data["pull_request"]["head"]["repo"]["full_name"] = "someone/fork"
    if label is not None:
        data["label"]["name"] = label
    if sender is None:
        del data["sender"]
    else:
        data["sender"]["login"] = sender
    if action is not None:
        data["action"] = action
    return parse_event("pull_request_target", data, None)


def dispatch(**inputs: str):
    data = json.loads((EVENTS / "workflow_dispatch.json").read_text())
    data["inputs"] = inputs
    return parse_event("workflow_dispatch", data, None)


@pytest.mark.parametrize(
    ("event", "mode", "expected"),
    [
        # This repository's pull request: measured on every push, A/B against the merge base.
        (
            lambda: pr("pull_request_opened.json"),
            "both",
            {"measure": True, "ab": True, "ab_base": BASE, "ab_base_kind": "merge-base"},
        ),
        (lambda: pr("pull_request_synchronize.json"), "baseline", {"measure": True, "ab": False}),
        (lambda: pr("pull_request_opened.json"), "ab", {"measure": False, "ab": True}),
        # A fork's push: nothing measured; the comment says the new head needs the label.
        (
            lambda: pr("pull_request_synchronize.json", fork=True),
            "both",
            {"measure": False, "ab": False, "notice": "needs-label"},
        ),
        # The maintainer's label on a fork: that exact commit is measured.
        (
            lambda: pr("pull_request_labeled.json", fork=True, label="benchmark"),
            "both",
            {"measure": True, "ab": True, "head_sha": HEAD},
        ),
        # Another label starts nothing and asks for nothing.
        (
            lambda: pr("pull_request_labeled.json", label="bug"),
            "both",
            {"measure": False, "ab": False, "notice": None, "comment": False},
        ),
        # The accept label measures too, and carries who accepted which head.
        (
            lambda: pr("pull_request_labeled.json", label="benchmark-accept", sender="lead"),
            "both",
            {
                "measure": True,
                "acceptance": Acceptance(label="benchmark-accept", by="lead", head_sha=HEAD),
            },
        ),
        # Taking the accept label off judges this repository's head again, without it...
        (
            lambda: pr("pull_request_labeled.json", label="benchmark-accept", action="unlabeled"),
            "both",
            {"measure": True, "acceptance": None},
        ),
        # ... and a fork's head waits for a go label.
        (
            lambda: pr(
                "pull_request_labeled.json",
                fork=True,
                label="benchmark-accept",
                action="unlabeled",
            ),
            "both",
            {"measure": False, "notice": "withdrawn"},  # the accepted verdict is taken down
        ),
        (
            lambda: pr("pull_request_labeled.json", label="bug", action="unlabeled"),
            "both",
            {"measure": False, "comment": False},
        ),
        # An accept label whose event names no sender is no acceptance ("@unknown").
        (
            lambda: pr("pull_request_labeled.json", label="benchmark-accept", sender=None),
            "both",
            {"measure": True, "acceptance": None, "refused": "the label event names no sender"},
        ),
        # A manual run in mode both without a base: the default branch's head.
        (
            lambda: dispatch(mode="both"),
            "baseline",
            {"measure": True, "ab": True, "ab_base": "main", "ab_base_kind": "default-branch"},
        ),
        (lambda: dispatch(mode="ab", base="v0.1.0"), "baseline", {"measure": False, "ab": True}),
        (lambda: dispatch(), "both", {"measure": True, "ab": False}),
        # A tag's push is the promote workflow's: nothing for the benchmark workflow.
        (
            lambda: parse_event("push", {"ref": "refs/tags/v1.0.0"}, None),
            "both",
            {"measure": False, "ab": False, "comment": False},
        ),
    ],
)
def test_the_gate_decides_which_jobs_run(event, mode, expected):
    decided = gate(event(), mode)
    seen = {**vars(decided), "comment": decided.comment}
    assert {k: seen[k] for k in expected} == expected, decided.reason


def test_the_plan_survives_its_trip_through_a_job_output():
    decided = gate(pr("pull_request_labeled.json", label="benchmark-accept"), "both", shards=3)
    outputs = decided.outputs()
    assert json.loads(outputs["shards"]) == [1, 2, 3]
    assert outputs["measure"] == "true"
    assert Gate.from_json(outputs["plan"]) == decided


@pytest.mark.parametrize(
    "text", ["", "[]", "{not json", '{"measure": true, "shards": 0}', '{"nope": 1}']
)
def test_a_broken_plan_is_a_one_line_error(text):
    with pytest.raises(InputError, match="CI_BENCH_PLAN") as caught:
        Gate.from_json(text)
    assert "\n" not in str(caught.value)


def test_each_role_runs_its_steps_and_a_report_expects_the_planned_ab():
    decided = gate(pr("pull_request_opened.json"), "both")
    report = plan_for("report", None, decided, mode="both", comment=True, publish=True)
    assert report.steps == (Step.MERGE, Step.JUDGE, Step.PUBLISH)
    assert report.expect_ab
    assert not plan_for(
        "report", None, gate(None, "both"), mode="both", comment=True, publish=True
    ).expect_ab
    single = plan_for(
        "all", pr("pull_request_opened.json"), decided, mode="both", comment=True, publish=True
    )
    assert single.steps == (
        Step.MEASURE,
        Step.CONFIRM,
        Step.AB,
        Step.JUDGE,
        Step.PUBLISH,
        Step.COMMENT,
    )
    release = parse_event("push", {"ref": "refs/tags/v1.0.0"}, None)
    assert (
        plan_for(
            "all", release, gate(release, "both"), mode="baseline", comment=True, publish=True
        ).role
        == "promote"
    )
    with pytest.raises(InputError, match="--role"):
        plan_for("nope", None, decided, mode="both", comment=True, publish=True)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("by", "role", "legacy", "refused"),
    [
        ("lead", "write", "write", None),
        ("lead", "maintain", "write", None),  # the legacy field reads maintain as write
        ("lead", "admin", "admin", None),
        ("lead", "release-manager", "write", None),  # a custom role based on write
        ("Codertocat", "admin", "admin", "opened this pull request"),  # the author, whatever
        ("codertocat", "admin", "admin", "opened this pull request"),  # case-insensitive
        ("helper", "triage", "read", "has the triage role"),  # never "read permission"
        ("helper", "read", "read", "has the read role"),
        ("helper", "labeller", "read", "custom role 'labeller' here (based on read)"),
        ("stranger", "none", "none", "is not a collaborator"),
    ],
)
def test_an_acceptance_counts_like_an_approval(by, role, legacy, refused):
    why = acceptance_refusal(by, "Codertocat", role, legacy)
    assert (why is None) if refused is None else (refused in (why or ""))
