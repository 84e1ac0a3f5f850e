"""History on the data branch: append a record through the contents API, no checkout.

The file for the record's device is read, merged (``store.history.merge_text``: idempotent
per commit, device and source; retention) and written back with the blob sha it was read
at; a concurrent writer makes the write conflict and the read-merge-write is retried (the
runs of a burst of merges each record their commit and may finish together).
"""

from __future__ import annotations

import functools
from typing import Literal

from ci_bench.github.api import GitHubClient, commit_with_retry
from ci_bench.schema.history import HistoryRecord
from ci_bench.store.history import DATA_BRANCH, DEFAULT_KEEP, device_file, merge_text


def append_through_api(
    client: GitHubClient,
    record: HistoryRecord,
    *,
    branch: str = DATA_BRANCH,
    folder: str = "history",
    keep: int = DEFAULT_KEEP,
) -> tuple[Literal["written", "unchanged"], str]:
    """Append ``record`` to ``folder/<device>.jsonl`` on ``branch`` (created if absent)."""
    path = (
        f"{folder}/{device_file(record.device.identity)}"
        if folder
        else device_file(record.device.identity)
    )
    client.ensure_branch(branch, client.default_branch())
    merge = functools.partial(merge_text, record=record, keep=keep, origin=f"{path} on {branch}")
    message = (
        f"ci-bench: history of {record.commit[:12]} on {record.device.identity} ({record.source})"
    )
    return commit_with_retry(client, path, branch, message, merge, attempts=6), path
