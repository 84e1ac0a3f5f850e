"""The runner's ``${{ }}`` expressions and ``if:`` conditions, GitHub's rules one by one."""

from __future__ import annotations

import pytest

from tests.harness.workflow_expressions import (
    ExpressionError,
    as_text,
    condition,
    evaluate,
    interpolate,
    truthy,
)

CONTEXT = {
    "github": {"event_name": "push", "event": {"inputs": {"cases": ""}, "number": 7}},
    "inputs": {"profile": "smoke", "flag": True},
    "needs": {"plan": {"outputs": {"shards": '["a", "b"]', "measure": "true"}}},
    "matrix": {"shard": 2},
    "env": {},
}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("'it''s'", "it's"),
        ("3", 3),
        ("1.5", 1.5),
        ("true", True),
        ("null", None),
        ("${{ inputs.profile }}", "smoke"),
        ("github.event.number", 7),
        ("github.event.missing.deeper", None),
        ("inputs.profile == 'SMOKE'", True),  # strings compare case-insensitively
        ("github.event.inputs.cases == null", True),  # '' and null are both empty
        ("inputs.profile != 'ci'", True),
        ("!inputs.flag", False),
        ("inputs.profile && 'yes'", "yes"),  # && and || give a value, not a bool
        ("'' || 'fallback'", "fallback"),
        ("0 && 'never'", 0),
        ("(false || true) && !(1 == 2)", True),
        ("contains(fromJSON(needs.plan.outputs.shards), 'B')", True),
        ("contains('ci-bench', 'BENCH')", True),
        ("startsWith(github.event_name, 'PU')", True),
        ("format('{0}-{1}', matrix.shard, true)", "2-true"),
        ("fromJSON(needs.plan.outputs.measure)", True),
    ],
)
def test_an_expression_has_githubs_value(text, value):
    assert evaluate(text, CONTEXT) == value


def test_to_json_and_text_are_githubs():
    assert evaluate("toJSON(matrix)", CONTEXT) == '{\n  "shard": 2\n}'
    assert [as_text(v) for v in (None, True, False, 3, {"a": 1})] == [
        "",
        "true",
        "false",
        "3",
        '{"a": 1}',
    ]
    assert [truthy(v) for v in (None, False, 0, "", "0", "false", [], 1)] == [
        False,
        False,
        False,
        False,
        True,
        True,
        True,
        True,
    ]


@pytest.mark.parametrize(
    "text",
    [
        "secrets.TOKEN",  # a context the emulation does not know
        "hashFiles('x')",  # a function it does not know
        "matrix.shard + 1",  # syntax it does not read
        "(true",
        "true)",
        "inputs.profile ==",
    ],
)
def test_an_expression_outside_the_subset_fails_loudly(text):
    with pytest.raises(ExpressionError):
        evaluate(text, CONTEXT)


def test_interpolation_replaces_every_expression_with_its_text():
    text = "run ${{ inputs.profile }} on ${{ matrix.shard }}: ${{ inputs.flag }}${{ env.none }}"
    assert interpolate(text, CONTEXT) == "run smoke on 2: true"
    assert interpolate(3, CONTEXT) == "3"
    assert interpolate(None, CONTEXT) == ""


@pytest.mark.parametrize(
    ("text", "success", "expected"),
    [
        (None, True, True),  # no if: runs after success only
        (None, False, False),
        (True, False, True),  # a YAML boolean is itself
        ("inputs.profile == 'smoke'", True, True),
        ("inputs.profile == 'smoke'", False, False),  # implicit success() &&
        ("always()", False, True),
        ("failure()", False, True),
        ("failure()", True, False),
        ("${{ !cancelled() && needs.plan.outputs.measure == 'true' }}", False, True),
        ("success() || inputs.flag", False, True),
    ],
)
def test_an_if_runs_as_on_github(text, success, expected):
    status = {"success": success, "failure": not success}
    assert condition(text, CONTEXT, status) is expected
