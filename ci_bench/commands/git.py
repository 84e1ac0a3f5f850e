"""Git at the edge: the commit a run measured, and the commands A/B needs (one runner)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ci_bench.errors import InputError
from ci_bench.schema import GitInfo


def git(cwd: Path, *args: str, timeout: float = 120) -> str:
    """Run ``git -C cwd ARGS``; a failure is a one-line InputError with git's last line."""
    try:
        done = subprocess.run(
            ["git", "-C", str(cwd), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"git {' '.join(args)}: {exc}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise InputError(f"git {' '.join(args)}: {last}")
    return done.stdout.strip()


def _maybe(cwd: Path, *args: str) -> str | None:
    """The same, for facts that are optional (not a checkout, no git installed)."""
    try:
        return git(cwd, *args, timeout=10)
    except InputError:
        return None


def git_info(cwd: Path, commit: str | None = None, ref: str | None = None) -> GitInfo:
    """Commit, ref and dirtiness; ``commit``/``ref`` (from the CI environment) take precedence."""
    head = _maybe(cwd, "rev-parse", "HEAD")
    status = _maybe(cwd, "status", "--porcelain", "--untracked-files=no")
    return GitInfo(
        commit=commit or head,
        ref=ref or _maybe(cwd, "symbolic-ref", "-q", "HEAD"),
        dirty=None if status is None else bool(status),
    )
