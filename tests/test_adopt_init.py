"""Adopting ci-bench (see tests/test_adopt.py): the reusable workflows install their own
version, and ``ci-bench init`` writes the adoption once and pins a commit zizmor accepts.
"""

from __future__ import annotations

import re
import shutil

import pytest
import yaml

from ci_bench import HOMEPAGE, REPOSITORY, __version__
from ci_bench.pipeline.adopt import yaml_lines
from tests.conftest import run_cli
from tests.harness.adopt import ADOPTER, PIN, ROOT, ZIZMOR
from tests.harness.adopt import zizmor as _zizmor

GHES_REF = "no-job.workflow_sha-on-GitHub-Enterprise-Server-which-ci-bench-does-not-support"


def test_the_reusable_workflows_install_their_own_version_never_the_latest():
    """A caller at @vX gets ci-bench X: every reusable workflow's default names this
    package's version; and the setup action runs at exactly the commit the caller pinned
    (checked out at ``job.workflow_sha``), never by a tag that can be moved."""
    for path in sorted((ROOT / ".github" / "workflows").glob("ci-bench*.yml")):
        text = path.read_text()
        data = yaml.safe_load(text)
        inputs = data[True]["workflow_call"]["inputs"]
        assert inputs["ci-bench"]["default"] == f"ci-bench=={__version__}", path.name
        assert re.findall(r"(?m)^\s*-? *uses: ci-bench/ci-bench/", text) == [], path.name
        setups = 0
        for job in data["jobs"].values():
            steps = job.get("steps", [])
            for index, step in enumerate(steps):
                if "actions/setup" not in str(step.get("uses", "")):
                    continue
                setups += 1
                assert step["uses"] == "./.ci-bench/.github/actions/setup", path.name
                fetched = steps[index - 1]
                assert str(fetched["uses"]).startswith("actions/checkout@"), path.name
                assert fetched["with"]["repository"] == "${{ job.workflow_repository }}"
                # GitHub Enterprise Server has no job.workflow_sha: the ref says why it fails.
                assert fetched["with"]["ref"] == "${{ job.workflow_sha || '" + GHES_REF + "' }}"
                assert fetched["with"]["path"] == ".ci-bench"
                assert fetched["with"]["persist-credentials"] is False
        assert setups, path.name
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'Homepage = "{HOMEPAGE}"' in pyproject


def test_init_writes_the_adoption_once_and_never_replaces_without_force(tmp_path):
    repo = tmp_path / "lib"
    shutil.copytree(ADOPTER, repo)
    first = run_cli("init", cwd=repo)
    assert first.returncode == 0, first.stderr
    assert "create: pyproject.toml [tool.ci-bench] (kernels: ['tpu_ops.scale'])" in first.stdout
    callers = sorted((repo / ".github" / "workflows").glob("*.yml"))
    assert [p.name for p in callers] == [
        "benchmark.yml",
        "lower-relay.yml",
        "lower.yml",
        "release.yml",
    ]
    lines = sum(yaml_lines(p.read_text()) for p in callers)
    assert lines <= 25
    assert f"The caller workflows: {lines} lines" in first.stdout
    assert "Runner-side checklist" in first.stdout
    for path in callers:
        assert f"{REPOSITORY}/.github/workflows/" in path.read_text()
        assert f"@v{__version__}" in path.read_text()
    assert (repo / "constraints" / "tpu.txt").read_text().count("==") == 3
    assert (repo / "baselines" / "README.md").is_file()
    ignore = (repo / ".gitignore").read_text()
    assert "create: .gitignore (.cache/jax/, ci-bench-preview/, ci-bench-out/)" in first.stdout

    again = run_cli("init", cwd=repo)  # idempotent: everything unchanged
    assert again.returncode == 0, again.stderr
    assert "create:" not in again.stdout
    assert again.stdout.count("unchanged:") == 8
    assert (repo / ".gitignore").read_text() == ignore

    (repo / ".github" / "workflows" / "lower.yml").write_text("# my own\n")
    before = (repo / "pyproject.toml").read_text()
    refused = run_cli("init", "--kernels", "tpu_ops.other", cwd=repo)
    assert refused.returncode == 2
    assert "would replace pyproject.toml ([tool.ci-bench]), .github/workflows/lower.yml" in (
        refused.stderr
    )
    assert (repo / ".github" / "workflows" / "lower.yml").read_text() == "# my own\n"
    assert (repo / "pyproject.toml").read_text() == before  # nothing written at all
    forced = run_cli("init", "--kernels", "tpu_ops.other", "--force", cwd=repo)
    assert forced.returncode == 0, forced.stderr
    assert 'kernels = ["tpu_ops.other"]' in (repo / "pyproject.toml").read_text()
    assert "[project]" in (repo / "pyproject.toml").read_text()  # the rest kept


@pytest.mark.skipif(not ZIZMOR.exists(), reason="zizmor (the test extra) is not installed")
def test_init_pins_a_commit_that_zizmors_default_persona_accepts(tmp_path):
    repo = tmp_path / "lib"
    shutil.copytree(ADOPTER, repo)
    by_tag = run_cli("init", cwd=repo)
    assert by_tag.returncode == 0, by_tag.stderr
    assert "`ci-bench init --pin <commit of the tag> --force` pins a commit" in by_tag.stdout
    flagged = _zizmor(repo)
    assert flagged.returncode != 0
    assert "unpinned-uses" in flagged.stdout + flagged.stderr  # a tag can be moved

    pinned = run_cli("init", "--pin", PIN, "--force", cwd=repo)
    assert pinned.returncode == 0, pinned.stderr
    assert f"They run ci-bench at commit {PIN}: the reusable workflows and the package" in (
        pinned.stdout
    )
    for path in sorted((repo / ".github" / "workflows").glob("*.yml")):
        assert f"{REPOSITORY}/.github/workflows/" in path.read_text()
        # A commit is never labelled with a version: nothing here knows which it is.
        assert f"@{PIN}  # pinned: ci-bench init --pin" in path.read_text()
        assert f"# v{__version__}" not in path.read_text()
        # The package too: pip installs ci-bench from that commit, whatever its version.
        assert f"    with:\n      ci-bench: git+{HOMEPAGE}@{PIN}\n" in path.read_text()
    # The runner groups admit the called workflows by the ref the callers use.
    checklist = pinned.stdout[pinned.stdout.index("Runner-side checklist") :]
    assert f"{REPOSITORY}/.github/workflows/ci-bench.yml@{PIN}" in checklist
    assert f"{REPOSITORY}/.github/workflows/ci-bench-release.yml@{PIN}" in checklist
    assert f"@v{__version__}" not in checklist
    clean = _zizmor(repo)
    assert clean.returncode == 0, clean.stdout + clean.stderr

    bad = run_cli("init", "--pin", "v0.2.0", "--force", cwd=repo)
    assert bad.returncode == 2
    assert "a commit is 40 lowercase hex digits" in bad.stderr
