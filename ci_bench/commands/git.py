"""Git edge: the commit and ref a run measured, when the folder is a git checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ci_bench.schema import GitInfo


def _git(cwd: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_info(cwd: Path, commit: str | None = None, ref: str | None = None) -> GitInfo:
    """Commit, ref and dirtiness; ``commit``/``ref`` (from the CI environment) take precedence."""
    head = _git(cwd, "rev-parse", "HEAD")
    status = _git(cwd, "status", "--porcelain", "--untracked-files=no")
    return GitInfo(
        commit=commit or head,
        ref=ref or _git(cwd, "symbolic-ref", "-q", "HEAD"),
        dirty=None if status is None else bool(status),
    )
