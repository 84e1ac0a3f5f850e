"""A newcomer's first hour, as the README writes it: a fresh clone, the quick start's main
job, then the next steps, each command parsed from the README (edit the README and this
test runs what it now says). The test extra's command is the suite itself, not run here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ci_bench.errors import ExitCode
from tests.test_docs import readme_commands

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _sh(command: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CI_BENCH_", "GITHUB_"))}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        ["bash", "-eo", "pipefail", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_a_fresh_clone_runs_the_readme_as_written(tmp_path):
    clone = tmp_path / "ci-bench"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    commands = readme_commands()
    [main] = [c for c in commands if c.startswith("python3 -m venv") and "[test]" not in c]
    done = _sh(main, clone, 900)  # pip's own cache makes the install fast after the first
    assert done.returncode == 0, done.stderr[-2000:]
    # The first table says what its figures are and what comes next.
    assert re.search(r"\d+/\d+ cases ok on cpu,", done.stdout), done.stdout[-2000:]
    assert "± their standard deviation" in done.stdout
    assert "next: `ci-bench run ... -o results.json`" in " ".join(done.stdout.split())
    assert (clone / ".venv" / "bin" / "ci-bench").is_file()
    assert not (clone / ".venv" / "bin" / "pytest").exists()  # the test extra stays out

    # The next steps, in the README's order, from the same folder.
    steps = [c for c in commands if c.startswith(".venv/bin/ci-bench ")]
    assert steps, "the README names no next step"
    promoted: list[str] = []
    compared: list[tuple[str, str]] = []
    for step in steps:
        done = _sh(step, clone, 900)
        # A verdict between two timings on a shared machine may be a regression (exit 1, as
        # README says): which one it reads is the machine's noise, never asserted here.
        judges = step.split()[1] in ("compare", "ab")
        allowed = (ExitCode.OK, ExitCode.FAILED) if judges else (ExitCode.OK,)
        assert done.returncode in allowed, f"{step}: exit {done.returncode}\n{done.stderr[-2000:]}"
        if done.returncode == ExitCode.FAILED:
            assert "regression" in done.stdout, done.stdout[-2000:]
        if " -o " in step:
            assert "next: `ci-bench compare" in " ".join(done.stdout.split())
        if step.split()[1] == "promote":
            promoted.append(step.split()[2])
        if step.split()[1] == "compare":
            assert "this PR" not in done.stdout
            assert "baseline ms" in done.stdout  # kept within 120 columns
            compared.append((step.split()[2], done.stdout))

    # The first verdict compares two different things: not the promoted file with itself.
    assert promoted
    assert compared, "the README's next steps compare nothing"
    (first, text), (baseline,) = compared[0], promoted[:1]
    assert first != baseline
    now = json.loads((clone / first).read_text())["meta"]
    then = json.loads((clone / baseline).read_text())["meta"]
    assert now["started_at"] != then["started_at"]  # a second measurement, not a copy
    assert f"measured {then['started_at'][:10]}" in text  # the footer names the baseline run
