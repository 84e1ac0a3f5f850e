"""The workflow runner on a small workflow of its own: needs order, job and step ``if:``,
outputs, ``env`` and GITHUB_ENV, matrix legs, artifacts, ``continue-on-error``, install
steps stood in for (or run), a lost runner, reusable workflows and ``workflow_run`` chains."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.pipeline_repo import git
from tests.harness.test_workflow_steps import repository_with
from tests.harness.workflow_runner import Runner

DEMO = """\
name: demo
on:
  push:
    branches: [main]
env:
  GREETING: hello
jobs:
  first:
    runs-on: ubuntu-latest
    outputs:
      word: ${{ steps.say.outputs.word }}
    env:
      WHO: ${{ github.event_name }}
    steps:
      - uses: actions/checkout@v4
      - id: say
        run: |
          echo "word=$GREETING-$WHO-$(cat kept.txt)" >> "$GITHUB_OUTPUT"
          echo "LATER=set by a step" >> "$GITHUB_ENV"
          { echo "MULTI<<EOF"; echo a; echo b; echo EOF; } >> "$GITHUB_ENV"
      - run: test "$LATER" = "set by a step" && test "$MULTI" = "$(printf 'a\\nb')"
      - run: python3 -m pip install --help > /dev/null
      - run: test "$CI_BENCH_VENV" = /stand-in && echo "## done" >> "$GITHUB_STEP_SUMMARY"
      - run: exit 3
        continue-on-error: true
      - if: failure()
        run: echo not after a tolerated failure
      - if: steps.say.outcome == 'success'
        env:
          STEP_ONLY: ${{ steps.say.outputs.word }}
        run: echo "step env $STEP_ONLY"
  second:
    needs: first
    strategy:
      matrix:
        n: [1, 2]
    steps:
      - uses: actions/checkout@v4
      - run: echo "${{ needs.first.outputs.word }} ${{ matrix.n }}" > got.txt
      - uses: actions/upload-artifact@v6
        with:
          name: got-${{ matrix.n }}
          path: got.txt
  third:
    needs: second
    steps:
      - uses: actions/checkout@v4
      - uses: actions/download-artifact@v7
        with:
          pattern: got-*
          path: all
      - run: cat all/got-1/got.txt all/got-2/got.txt
      - run: exit 1
      - run: echo never after a failure
      - if: always()
        run: echo always
  cleanup:
    needs: third
    if: always() && needs.third.result == 'failure'
    steps:
      - uses: actions/checkout@v4
      - run: echo cleaning
  never:
    if: github.event_name == 'pull_request'
    steps:
      - run: exit 1
"""


@pytest.fixture
def runner(tmp_path: Path) -> Runner:
    origin = tmp_path / "origin"
    repository_with(origin, "kept.txt", "world\n")
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    (workflows / "demo.yml").write_text(DEMO)
    return Runner(
        origin=origin,
        root=tmp_path / "runs",
        api_url="http://127.0.0.1:9",
        repository="o/r",
        token="t",
        installed={"CI_BENCH_VENV": "/stand-in"},
        workflows=workflows,
    )


def _push(runner: Runner):
    sha = git(runner.origin, "rev-parse", "HEAD")
    [run] = runner.dispatch("push", {"ref": "refs/heads/main"}, "refs/heads/main", sha)
    return run


def _outcomes(job) -> list[str]:
    return [step.outcome for step in job.steps]


def test_a_workflow_runs_its_jobs_in_needs_order_with_outputs_env_and_artifacts(runner):
    run = _push(runner)
    assert run.workflow == "demo.yml"
    assert run.name == "demo"
    assert [(j.job, j.result) for j in run.jobs] == [
        ("first", "success"),
        ("second", "success"),
        ("second", "success"),
        ("third", "failure"),
        ("cleanup", "success"),
        ("never", "skipped"),
    ]
    assert run.conclusion == "failure"
    assert run.result("second") == "success"
    [first] = run.job("first")
    # checkout, outputs, GITHUB_ENV, the install stood in for, the tolerated failure,
    # failure() not run after it, the step's own env.
    assert _outcomes(first) == [
        "success",
        "success",
        "success",
        "skipped",
        "success",
        "failure",
        "skipped",
        "success",
    ]
    assert first.outputs == {"word": "hello-push-world"}
    assert first.step('echo "step env').output == "step env hello-push-world\n"
    assert first.summary == "## done\n"
    assert [leg.matrix for leg in run.job("second")] == [{"n": 1}, {"n": 2}]
    [third] = run.job("third")
    assert _outcomes(third) == ["success", "success", "success", "failure", "skipped", "success"]
    assert third.steps[2].output == "hello-push-world 1\nhello-push-world 2\n"
    assert (run.artifacts / "got-2" / "got.txt").read_text() == "hello-push-world 2\n"
    assert runner.runs[run.run_id] is run


def test_install_steps_run_for_real_in_the_jobs_named(runner):
    runner.run_install = frozenset({"first"})
    [first] = _push(runner).job("first")
    # pip ran (its help), and nothing stood in for it: CI_BENCH_VENV is not set.
    assert [s.outcome for s in first.steps[3:5]] == ["success", "failure"]
    assert first.result == "failure"


def test_a_lost_runner_fails_its_leg_with_no_steps(runner):
    runner.lose = {("second", json.dumps({"n": 2}))}
    run = _push(runner)
    lost = run.job("second")[1]
    assert (lost.result, lost.steps) == ("failure", [])
    assert run.result("second") == "failure"
    assert [j.result for j in run.job("third")] == ["skipped"]
    assert not (run.artifacts / "got-2").exists()


def test_an_event_starts_only_the_workflows_it_triggers(runner):
    sha = git(runner.origin, "rev-parse", "HEAD")
    assert runner.dispatch("push", {"ref": "refs/heads/other"}, "refs/heads/other", sha) == []


CALLER = """name: caller
on: push
concurrency:
  group: caller-${{ github.ref }}
jobs:
  call:
    uses: ./.github/workflows/called.yml
    with:
      word: from the caller
"""
CALLED = """name: called
on:
  workflow_call:
    inputs:
      word:
        type: string
      other:
        type: string
        default: a default
jobs:
  inner:
    outputs:
      said: ${{ steps.say.outputs.said }}
    steps:
      - uses: actions/checkout@v4
      - id: say
        run: >-
          echo "said=${{ inputs.word }}, ${{ inputs.other }}, ${{ job.workflow_sha }}"
          >> "$GITHUB_OUTPUT"
"""
CHAINED = """name: chained
on:
  workflow_run:
    workflows: [caller]
    types: [completed]
jobs:
  after:
    if: github.event.workflow_run.conclusion == 'success'
    steps:
      - uses: actions/checkout@v4
      - run: echo "${{ github.event.workflow_run.name }} ${{ github.event.workflow_run.id }}"
"""


def test_a_reusable_workflow_runs_in_its_callers_place_and_a_finished_run_chains(runner):
    for name, text in {"caller.yml": CALLER, "called.yml": CALLED, "chained.yml": CHAINED}.items():
        (runner.workflows / name).write_text(text)
    (runner.workflows / "demo.yml").unlink()
    sha = git(runner.origin, "rev-parse", "HEAD")
    caller, chained = runner.dispatch("push", {"ref": "refs/heads/main"}, "refs/heads/main", sha)
    assert caller.concurrency_group == "caller-refs/heads/main"
    [inner] = caller.job("inner")
    assert inner.outputs == {"said": f"from the caller, a default, {sha}"}
    assert (chained.workflow, chained.event) == ("chained.yml", "workflow_run")
    [after] = chained.job("after")
    assert after.steps[1].output == f"caller {caller.run_id}\n"
