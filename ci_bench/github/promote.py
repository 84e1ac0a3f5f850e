"""Promotion through the contents API: the release job commits baselines without a checkout.

Each file is read from the target branch, merged with this run's entry (other devices'
entries are kept) and written with the blob sha it was read at; a concurrent change makes
the write fail with a conflict, and the read-merge-write is retried once.

``pull-request`` mode (for protected default branches) decides what is pending against the
default branch, not the promotion branch, so a rerun finishes a half-done promotion: the
branch written but no pull request (GitHub refused to open it) opens it, an open one is
named. A refusal quotes GitHub and says what the maintainer can do.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Literal

from ci_bench.errors import InputError
from ci_bench.github.api import GitHubClient, GitHubError, commit_with_retry
from ci_bench.schema import Results
from ci_bench.store.baseline_text import render_baseline
from ci_bench.store.baselines import (
    BaselineEntry,
    BaselineFile,
    entry_from_results,
    merge_entry,
)
from ci_bench.store.files import validation_message


def _parse_remote(text: str, path: str) -> BaselineFile:
    from pydantic import ValidationError

    try:
        return BaselineFile.model_validate_json(text)
    except ValidationError as exc:
        raise InputError(f"{path} (on GitHub): {validation_message(exc)}") from None


def _merged(
    text: str | None, *, path: str, kernel: str, version: str, entry: BaselineEntry
) -> str | None:
    """The file's new text with ``entry`` merged in, or None when nothing changes."""
    existing = _parse_remote(text, path) if text is not None else None
    promotion = merge_entry(existing, kernel, version, entry, force=False, keep_existing=True)
    return None if promotion.action == "unchanged" else render_baseline(promotion.document)


def promote_through_api(
    client: GitHubClient,
    results: Results,
    tag: str,
    folder: str,
    via: Literal["commit", "pull-request"],
) -> list[str]:
    """Commit each kernel's baseline to the default branch, or to a branch with a PR."""
    device = results.meta.device.identity
    base = client.default_branch()
    branch = base if via == "commit" else f"ci-bench/baselines-{tag}"
    promoted_at = datetime.now(UTC)
    lines: list[str] = []
    pending = False  # pull-request mode: the default branch lacks something this run has
    for kernel, version in results.meta.kernels.items():
        path = f"{folder}/{kernel}_v{version}.json" if folder else f"{kernel}_v{version}.json"
        entry = entry_from_results(results, kernel, promoted_at, tag)
        if not entry.cases:
            continue

        merge = functools.partial(_merged, path=path, kernel=kernel, version=version, entry=entry)

        message = f"ci-bench: {kernel} v{version} baseline from {tag} on {device}"
        if via == "pull-request":
            # Idempotent: nothing to change on the default branch means no branch, no PR.
            current = client.read_file(path, base)
            if merge(current[0] if current else None) is None:
                lines.append(f"unchanged: {path} on {base} ({device}, {tag})")
                continue
            if not pending:
                client.ensure_branch(branch, base)
            pending = True
        outcome = commit_with_retry(client, path, branch, message, merge)
        lines.append(f"{outcome}: {path} on {branch} ({device}, {tag})")
    if pending:
        lines.append(_pull_request(client, branch, base, tag, device))
    return lines


def _pull_request(client: GitHubClient, branch: str, base: str, tag: str, device: str) -> str:
    """Open the promotion PR, or name the one already open (a rerun after a refusal)."""
    existing = client.find_pull_request(branch, base)
    if existing:
        return f"pull request already open: {existing}"
    try:
        url = client.open_pull_request(
            branch,
            base,
            title=f"ci-bench: baselines from {tag}",
            body=f"Baselines measured on {device} for {tag}, promoted by ci-bench.",
        )
    except GitHubError as exc:
        raise GitHubError(
            f"{exc}. The baselines are on branch {branch}: open a pull request from it into "
            f"{base} by hand, or allow GitHub Actions to create pull requests (Settings > "
            "Actions > General > Workflow permissions) and rerun this job, which then opens it"
        ) from None
    return f"pull request: {url or 'already open for ' + branch}"
