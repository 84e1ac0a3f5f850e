"""What a step does is read from its ``uses:`` or ``run:``, never its name: every step of
every workflow and action keeps its kind under a new name, and the emulated actions do what
the workflows rely on."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.harness.pipeline_repo import git
from tests.harness.workflow_expressions import ExpressionError
from tests.harness.workflow_files import GITHUB
from tests.harness.workflow_steps import (
    ACTION,
    COMPOSITE,
    INSTALL,
    SCRIPT,
    Call,
    kind_of,
    label_of,
    run_action,
)


def _steps_of(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Every step of a workflow (each job's) or of a composite action."""
    if "runs" in document:
        return document["runs"].get("steps", [])
    jobs = document.get("jobs") or {}
    return [step for job in jobs.values() for step in job.get("steps", [])]


def renamed_copy(target: Path, source: Path = GITHUB) -> Path:
    """``source`` (a ``.github`` folder) copied to ``target`` with every step of every
    workflow and action renamed (``step N``), what they use and run unchanged."""
    shutil.copytree(source, target)
    for path in sorted(target.rglob("*.yml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(document, dict):
            continue
        for number, step in enumerate(_steps_of(document)):
            step["name"] = f"step {number} of {path.stem}"
        path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return target


def all_steps(github: Path = GITHUB) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{path.relative_to(github)}#{number}", step)
        for path in sorted(github.rglob("*.yml"))
        for number, step in enumerate(_steps_of(yaml.safe_load(path.read_text()) or {}))
    ]


@pytest.mark.parametrize(
    ("step", "kind"),
    [
        ({"name": "Install", "run": "python3 -m pip install --user build"}, INSTALL),
        ({"name": "Build", "run": "pip3 install -e ."}, INSTALL),
        ({"name": "Install the world", "run": "ci-bench ci --role plan"}, SCRIPT),
        ({"name": "Anything", "uses": "./.ci-bench/.github/actions/setup"}, INSTALL),
        ({"uses": "ci-bench/ci-bench/.github/actions/setup@v1"}, INSTALL),
        ({"uses": "./.github/actions/other"}, COMPOSITE),
        ({"name": "Install", "uses": "actions/checkout@v4"}, ACTION),
    ],
)
def test_a_steps_kind_comes_from_what_it_uses_or_runs(step, kind):
    assert kind_of(step, GITHUB) == kind


def test_renaming_every_step_of_every_workflow_changes_no_kind(tmp_path: Path):
    copy = renamed_copy(tmp_path / ".github")
    before, after = all_steps(), all_steps(copy)
    assert [where for where, _ in before] == [where for where, _ in after]
    assert len(before) > 40
    for (where, old), (_, new) in zip(before, after, strict=True):
        assert old.get("name") != new["name"], where
        assert kind_of(old, GITHUB) == kind_of(new, copy), where


def test_the_install_steps_are_those_the_workflows_call_install():
    """On today's workflows the content rule finds exactly the steps named Install...: the
    ones the test environment stands in for (the setup action, the build tools' pip)."""
    for where, step in all_steps():
        named = str(step.get("name", "")).startswith("Install")
        in_action = where.startswith("actions/")  # the setup action's own step runs inside it
        assert (kind_of(step, GITHUB) == INSTALL) is (named and not in_action), where


def test_a_step_is_reported_by_its_name_else_what_it_does():
    assert label_of({"name": "Plan", "run": "x"}) == "Plan"
    assert label_of({"uses": "actions/checkout@v4"}) == "actions/checkout@v4"
    assert label_of({"run": "echo hi"}) == "echo hi"


def repository_with(folder: Path, name: str, text: str) -> str:
    """A git repository on ``main`` with one commit of one file; returns its hash."""
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    (folder / name).write_text(text)
    git(folder, "add", "-A")
    git(folder, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "one")
    return git(folder, "rev-parse", "HEAD")


@dataclass
class _Host:
    origin: Path
    repository: str = "o/r"
    own: Path = GITHUB
    runs: dict[int, Any] = field(default_factory=dict)
    foreign_checkouts: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class _Finished:
    artifacts: Path


def test_checkout_clones_the_ref_and_ci_bench_itself_is_this_checkout(tmp_path: Path):
    origin = tmp_path / "origin"
    sha = repository_with(origin, "a.txt", "one")
    host = _Host(origin)
    work = tmp_path / "work"
    assert run_action(host, "actions/checkout@v4", Call({}, work, tmp_path, sha)) == "success"
    assert (work / "a.txt").read_text() == "one"
    missing = Call({"ref": "no-such-branch", "path": "x"}, work, tmp_path, sha)
    assert run_action(host, "actions/checkout@v4", missing) == "failure"
    itself = Call(
        {"repository": "ci-bench/ci-bench", "ref": "v1", "path": ".ci-bench"}, work, tmp_path, sha
    )
    assert run_action(host, "actions/checkout@v4", itself) == "success"
    assert (work / ".ci-bench" / ".github" / "actions" / "setup" / "action.yml").is_file()
    assert host.foreign_checkouts == [("ci-bench/ci-bench", "v1", str(work / ".ci-bench"))]
    other = Call({"repository": "someone/else"}, work, tmp_path, sha)
    assert run_action(host, "actions/checkout@v4", other) == "failure"


def test_artifacts_go_up_and_come_down_by_name_pattern_and_run(tmp_path: Path):
    host, artifacts, work = _Host(tmp_path), tmp_path / "artifacts", tmp_path / "work"
    artifacts.mkdir()
    (work / "out").mkdir(parents=True)
    (work / "out" / "r.json").write_text("{}")
    (work / "single.txt").write_text("x")
    up = "actions/upload-artifact@v6"
    for with_ in (
        {"name": "results-1", "path": "out"},
        {"name": "results-2", "path": "single.txt"},
    ):
        assert run_action(host, up, Call(with_, work, artifacts, "")) == "success"
    assert (
        run_action(host, up, Call({"name": "n", "path": "gone"}, work, artifacts, "")) == "failure"
    )
    lenient = {"name": "n", "path": "gone", "if-no-files-found": "ignore"}
    assert run_action(host, up, Call(lenient, work, artifacts, "")) == "success"

    down, there = "actions/download-artifact@v7", tmp_path / "there"
    by_pattern = Call({"pattern": "results-*", "path": "shards"}, there, artifacts, "")
    assert run_action(host, down, by_pattern) == "success"
    assert (there / "shards" / "results-1" / "r.json").is_file()
    assert (there / "shards" / "results-2" / "single.txt").is_file()
    by_name = Call({"name": "results-1", "path": "one"}, there, artifacts, "")
    assert run_action(host, down, by_name) == "success"
    assert (there / "one" / "r.json").is_file()  # a named artifact lands unwrapped
    assert run_action(host, down, Call({"name": "nope"}, there, artifacts, "")) == "failure"

    host.runs[41] = _Finished(artifacts)
    other_run = {"name": "results-1", "run-id": "41", "path": "old"}
    assert run_action(host, down, Call(other_run, there, tmp_path, "")) == "failure"  # no token
    other_run["github-token"] = "t"
    assert run_action(host, down, Call(other_run, there, tmp_path, "")) == "success"


def test_pages_deploy_what_was_uploaded_and_unknown_actions_fail_loudly(tmp_path: Path):
    host, artifacts, work = _Host(tmp_path), tmp_path / "artifacts", tmp_path / "work"
    (work / "_site").mkdir(parents=True)
    (work / "_site" / "index.html").write_text("<p>")
    deploy = Call({}, work, artifacts, "")
    assert run_action(host, "actions/deploy-pages@v4", deploy) == "failure"
    assert run_action(host, "actions/upload-pages-artifact@v3", deploy) == "success"
    assert (artifacts / "github-pages" / "index.html").is_file()
    assert run_action(host, "actions/deploy-pages@v4", deploy) == "success"
    with pytest.raises(ExpressionError, match="no emulation"):
        run_action(host, "pypa/gh-action-pypi-publish@v1", deploy)
