"""Git at the edge: the commit a run measured, the merge base, the A/B base's checkout."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ci_bench.errors import InputError
from ci_bench.schema import GitInfo
from ci_bench.store.files import write_text


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
    """Commit, ref and dirtiness; the checkout's HEAD is the commit measured.

    ``commit``/``ref`` come from the CI environment: GITHUB_SHA is only a fallback, since
    under ``pull_request_target`` it names the base branch while the job measures the
    pull request's head.
    """
    head = _maybe(cwd, "rev-parse", "HEAD")
    status = _maybe(cwd, "status", "--porcelain", "--untracked-files=no")
    return GitInfo(
        commit=head or commit,
        ref=ref or _maybe(cwd, "symbolic-ref", "-q", "HEAD"),
        dirty=None if status is None else bool(status),
    )


def export_folder(root: Path, ref: str, folder: Path, dest: Path) -> Path:
    """Copy ``folder`` (inside the repository at ``root``) as it is at ``ref`` into ``dest``.

    A pull request is compared with the baselines of its BASE commit: the PR's own checkout
    could edit them. A folder absent at ``ref`` gives an empty ``dest`` (no baselines yet).
    """
    top = Path(git(root, "rev-parse", "--show-toplevel"))
    try:
        rel = folder.resolve().relative_to(top.resolve()).as_posix()
    except ValueError:
        raise InputError(f"{folder}: the baselines folder must be inside the repository") from None
    try:
        git(top, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except InputError:
        raise InputError(
            f"baselines at {ref[:12]}: that commit is not in this clone; check out with "
            "fetch-depth: 0, or pass --baselines-ref '' to use the checkout's baselines"
        ) from None
    dest.mkdir(parents=True, exist_ok=True)
    # Absent at ``ref`` (no baselines promoted yet): an empty folder.
    listing = _maybe(top, "ls-tree", "--name-only", f"{ref}:{rel}") if rel else None
    for name in listing.splitlines() if listing else []:
        if name.endswith(".json") and "/" not in name:
            text = git(top, "show", f"{ref}:{rel}/{name}")
            write_text(dest / name, text + "\n", what="baseline", replace=True)
    return dest


def resolve_commit(root: Path, ref: str, what: str) -> str:
    """The commit ``ref`` names in this clone, or a one-line error saying how to get it."""
    if ref.startswith("-"):
        raise InputError(f"{what}: {ref!r} is not a git ref")
    try:
        return git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except InputError:
        raise InputError(
            f"{what}: {ref[:40]} is not a commit in this clone (check out with fetch-depth: 0)"
        ) from None


def merge_base(root: Path, head: str, base: str) -> str:
    """The commit a pull request branched from: what its own changes are measured against.

    The base branch's tip would charge the pull request with everything merged into the
    base since it branched.
    """
    head_sha = resolve_commit(root, head, "A/B head")
    base_sha = resolve_commit(root, base, "A/B base")
    try:
        return git(root, "merge-base", head_sha, base_sha)
    except InputError:
        raise InputError(
            f"A/B base: {head_sha[:12]} and {base_sha[:12]} share no history in this clone"
        ) from None


def toplevel(root: Path) -> Path:
    """The checkout's top level: where the repository's own code lives."""
    return Path(git(root, "rev-parse", "--show-toplevel"))


@contextlib.contextmanager
def worktree(root: Path, sha: str) -> Iterator[Path]:
    """A detached checkout of ``sha`` in a temporary folder (the same subfolder of the
    repository as ``root``), removed afterwards."""
    top = toplevel(root)
    folder = Path(tempfile.mkdtemp(prefix="ci-bench-base-"))
    git(top, "worktree", "add", "--detach", "--force", str(folder), sha)
    try:
        yield folder / root.resolve().relative_to(top.resolve())
    finally:
        with contextlib.suppress(InputError):
            git(top, "worktree", "remove", "--force", str(folder))


def changed_files(root: Path, sha: str) -> set[str]:
    """Paths (from the top level) that differ between ``sha`` and the checkout as it is,
    uncommitted edits included: what a pull request (or a local A/B) changed."""
    out = _maybe(toplevel(root), "diff", "--name-only", "--no-renames", sha)
    return set(out.splitlines()) if out else set()


def tracked_files(root: Path) -> set[str]:
    """Every file git tracks in the checkout (paths from the top level)."""
    out = _maybe(toplevel(root), "ls-files")
    return set(out.splitlines()) if out else set()
