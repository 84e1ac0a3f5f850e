"""The verdict table is the single source: enum, policy, icons, annotations, README."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from ci_bench.github.outputs import annotations
from ci_bench.report.rows import VERDICT_ICONS
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


def test_how_the_comment_shows_a_state_is_its_entry() -> None:
    """Headline, settled and the comment section come from the table, not from names in
    report/comment.py: adding a state is one entry (and its rule in judge/ladder.py)."""
    from ci_bench.report.comment import CHANGED

    shown = {s.name: (s.settled, s.listed) for s in VERDICTS}
    assert [n for n, (settled, _) in shown.items() if settled] == [
        "drift",
        "new",
        "improved",
        "pass",
    ]
    assert CHANGED == ("regression", "accepted", "noisy", "toolchain", "improved")
    assert [n for n, (_, listed) in shown.items() if listed == "errors"] == ["error", "unmeasured"]
    assert all(s.headline for s in VERDICTS if s.scope == "run")


def test_the_states_before_the_comparison_are_ladder_rules() -> None:
    """error, new, incomparable, missing and unmeasured come from judge/ladder.py too."""
    from ci_bench.judge.ladder import Rung, before_comparison, never_measured, not_run

    run = results([case()])
    ok = run.cases[0]
    failed = ok.model_copy(update={"status": "error", "error": "boom"})
    assert before_comparison(failed, None, None, None, run.meta) == Rung("error", "boom", None)
    assert before_comparison(ok, None, None, None, run.meta) == Rung(
        "new", "no baseline file", None
    )
    assert not_run("smoke").verdict == "missing"
    assert never_measured("no shard measured it").verdict == "unmeasured"
