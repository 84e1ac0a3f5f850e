"""The verdict table is the single source: enum, policy, icons, annotations, README."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from ci_bench.github.outputs import annotations
from ci_bench.report.render import VERDICT_ICONS
from ci_bench.schema import VERDICTS, CaseVerdict, FailPolicy, Report, RunState
from ci_bench.schema.verdicts import CONFIGURABLE, verdict_table_markdown
from tests.harness.factories import case, results

# The table moved from the README to the docs site's verdicts page.
README = Path(__file__).resolve().parents[1] / "docs" / "VERDICTS.md"


def test_the_schema_enums_are_the_table():
    field = CaseVerdict.model_fields["verdict"].annotation
    assert typing.get_args(field) == tuple(s.name for s in VERDICTS if s.scope == "case")
    run = RunState.model_fields["state"].annotation
    assert typing.get_args(run) == tuple(s.name for s in VERDICTS if s.scope == "run")
    overall = Report.model_fields["verdict"].annotation
    assert typing.get_args(overall) == tuple(s.name for s in VERDICTS)


def test_every_state_has_an_icon_and_a_policy_default():
    assert set(VERDICT_ICONS) == {s.name for s in VERDICTS}
    policy = FailPolicy()
    for state in VERDICTS:
        assert policy.fails(state.name) is state.fails
    assert set(FailPolicy.model_fields) == {name.replace("-", "_") for name in CONFIGURABLE}
    # The config spells every switch as it is named in the table (fail-on.ab-missing).
    dumped = FailPolicy().model_dump(by_alias=True)
    assert set(dumped) == set(CONFIGURABLE)


def test_annotation_levels_come_from_the_table():
    from ci_bench.judge.compare import build_report
    from ci_bench.schema import Thresholds

    case_states = [s for s in VERDICTS if s.scope == "case"]
    run_states = [s for s in VERDICTS if s.scope == "run"]
    res = results([case(f"k/c{i}/float32", 1.0) for i, _ in enumerate(case_states)])
    verdicts = [
        CaseVerdict(id=c.id, kernel=c.kernel, verdict=s.name, reason="r", current=c)
        for c, s in zip(res.cases, case_states, strict=True)
    ]
    states = [RunState(state=s.name, reason="r") for s in run_states]
    report = build_report(verdicts, [], res.meta, Thresholds(), FailPolicy(), run_states=states)
    lines = annotations(report)
    expected = [(s.annotation, c.id) for c, s in zip(res.cases, case_states, strict=True)]
    expected += [(s.annotation, "run") for s in run_states]
    assert [
        (m[1], m[2]) for m in (re.match(r"::(\w+) title=.*?::(.*?): r$", x) for x in lines)
    ] == [(level, cid) for level, cid in expected if level]


def test_the_readme_table_is_generated_from_the_table():
    text = README.read_text(encoding="utf-8")
    block = text.split("<!-- verdict-table:", 1)[1].split("<!-- /verdict-table -->", 1)[0]
    assert block.split("\n", 1)[1].strip() == verdict_table_markdown(), (
        "docs/VERDICTS.md's verdict table is stale: paste "
        "ci_bench.schema.verdicts.verdict_table_markdown() between the markers"
    )
