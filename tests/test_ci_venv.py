"""The setup action's ci_venv.sh for real: the venv is keyed by what pip resolves, not by the
text of pyproject.toml, and old venvs are evicted. A tiny project without dependencies keeps it
quick (venv creation and pip run for real, against the package index)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / ".github" / "actions" / "setup" / "ci_venv.sh"
PYPROJECT = """\
[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "tiny-lib"
version = "0.1.0"
dependencies = [{deps}]
# {comment}

[tool.setuptools]
py-modules = ["tiny_lib"]
"""


def setup(folder: Path, cache: Path, *, deps: str = "", comment: str = "") -> str:
    (folder / "tiny_lib.py").write_text("VALUE = 1\n")
    (folder / "pyproject.toml").write_text(PYPROJECT.format(deps=deps, comment=comment))
    env_file = folder / "github-env"
    env_file.write_text("")
    env = {
        **os.environ,
        "CI_BENCH_CACHE": str(cache),
        "CI_BENCH_KEEP_VENVS": "1",
        "GITHUB_ENV": str(env_file),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    done = subprocess.run(
        ["bash", str(SCRIPT), "-", "-e", "."],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    values = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
    return values["CI_BENCH_VENV"]


def test_the_venv_follows_the_resolved_dependencies_and_old_ones_are_evicted(tmp_path):
    project, cache = tmp_path / "project", tmp_path / "cache"
    project.mkdir()
    first = setup(project, cache)
    stamp = (Path(first) / ".complete").stat().st_mtime_ns

    # A comment edit resolves to the same set: the same venv, not rebuilt.
    again = setup(project, cache, comment="a comment edit")
    assert again == first
    assert (Path(first) / ".complete").stat().st_mtime_ns == stamp

    # A new dependency resolves differently: a new venv, and (keep 1) the old one goes.
    changed = setup(project, cache, deps='"six"')
    assert changed != first
    assert "six==" in (Path(changed) / ".resolved").read_text()
    assert not Path(first).exists()
    assert sorted(p.name for p in cache.glob("venv-*") if p.is_dir()) == [Path(changed).name]


def _install(folder: Path, cache: Path, requirement: str) -> str:
    env_file = folder / "github-env"
    env_file.write_text("")
    env = {
        **os.environ,
        "CI_BENCH_CACHE": str(cache),
        "GITHUB_ENV": str(env_file),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    done = subprocess.run(
        ["bash", str(SCRIPT), "-", requirement],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    values = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
    return values["CI_BENCH_VENV"]


def test_two_commits_of_one_version_pinned_by_git_url_are_two_venvs(tmp_path):
    """``init --pin`` makes the callers install ci-bench from a commit (``git+…@<sha>``):
    a pin moved to another commit of the same version must not reuse the old venv."""
    library, cache, work = tmp_path / "lib", tmp_path / "cache", tmp_path / "work"
    library.mkdir()
    work.mkdir()
    (library / "pyproject.toml").write_text(PYPROJECT.format(deps="", comment=""))

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@e", *args],
            cwd=library,
            check=True,
            capture_output=True,
            text=True,
        )
        return done.stdout.strip()

    git("init", "-q", "-b", "main")
    commits = []
    for value in (1, 2):  # two commits, one version (0.1.0)
        (library / "tiny_lib.py").write_text(f"VALUE = {value}\n")
        git("add", "-A")
        git("commit", "-q", "-m", f"value {value}")
        commits.append(git("rev-parse", "HEAD"))
    first, second = (_install(work, cache, f"git+file://{library}@{c}") for c in commits)
    assert first != second
    for venv, commit in ((first, commits[0]), (second, commits[1])):
        assert f"#{commit}" in (Path(venv) / ".resolved").read_text()
