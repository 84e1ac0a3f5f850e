"""The baseline store as a database: every promotion is one locked read-merge-write."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from ci_bench.errors import InputError
from ci_bench.schema import BaselineFile, Results
from ci_bench.store.baselines import (
    Promotion,
    baseline_path,
    check_promotable,
    load_baseline,
    plan_promotions,
    present,
    write_promotions,
)


@contextlib.contextmanager
def store_lock(folder: Path) -> Iterator[None]:
    """An exclusive lock on the baselines folder: one read-merge-write at a time.

    ``flock`` on the folder itself, so no lock file lands in the repository; the lock goes
    with the process, so a killed promotion never leaves the store locked.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY)
    except OSError as exc:
        raise InputError(f"{folder}: cannot open the baselines folder: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def promote_into(
    folder: Path,
    results: Results,
    *,
    promoted_at: datetime,
    tag: str | None,
    force: bool,
    source: str,
) -> list[Promotion]:
    """Read, merge and write each kernel's baseline under the store lock (a transaction).

    Concurrent promotions into one folder serialise here, so none loses another's entry.
    """
    check_promotable(results, source)
    if present(folder) and not folder.is_dir():
        raise InputError(f"{folder}: the baselines folder is not a directory")
    with store_lock(folder):
        existing: dict[str, BaselineFile | None] = {}
        for kernel, version in results.meta.kernels.items():
            path = baseline_path(folder, kernel, version)
            existing[kernel] = load_baseline(path, kernel) if present(path) else None
        promotions = plan_promotions(
            results, existing, promoted_at=promoted_at, tag=tag, force=force, source=source
        )
        write_promotions(folder, promotions)
    return promotions
