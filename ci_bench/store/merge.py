"""Join the shards of one matrix (``ci-bench run --shard i/n`` on n runners) into one Results."""

from __future__ import annotations

from collections.abc import Sequence

from ci_bench.errors import InputError
from ci_bench.schema import Results, RunMeta, RunSettings
from ci_bench.schema.shard import Shard


def _portable(settings: RunSettings) -> RunSettings:
    """Settings without the runner-local cache path, which differs between runners."""
    return settings.model_copy(update={"compilation_cache": None})


def _dirty(metas: Sequence[RunMeta]) -> bool | None:
    """Whether any shard was measured with uncommitted changes: one that was makes the whole
    run so (null: none says so, and some could not tell)."""
    flags = [m.git.dirty for m in metas]
    if any(flags):
        return True
    return None if None in flags else False


def merge_results(parts: Sequence[tuple[str, Results]]) -> Results:
    """Shards must share device, profile, settings, commit and kernel versions; ids must not
    repeat; one shard measured with uncommitted changes makes the merged run ``dirty``.

    The merged run covers the whole profile (``shard`` null). When a shard is lost and the
    files know their matrix (results version 2), the merge is incomplete and the lost
    shard's cases are judged ``unmeasured``; older files keep a description of the shards
    they hold.
    """
    if not parts:
        raise InputError("merge needs at least one results file")
    first_name, first = parts[0]
    kernels: dict[str, str] = {}
    seen: dict[str, str] = {}
    shards: set[str] = set()
    for name, part in parts:
        meta = part.meta
        for field, mine, theirs in (
            ("meta.device", meta.device.identity, first.meta.device.identity),
            ("meta.profile", meta.profile, first.meta.profile),
            ("meta.settings", _portable(meta.settings), _portable(first.meta.settings)),
            ("meta.case_globs", meta.case_globs, first.meta.case_globs),
            ("meta.matrix", meta.matrix, first.meta.matrix),
            ("meta.git.commit", meta.git.commit, first.meta.git.commit),
        ):
            if mine != theirs:
                raise InputError(f"{name}: {field}: {mine} differs from {first_name} ({theirs})")
        for kernel, version in meta.kernels.items():
            if kernels.setdefault(kernel, version) != version:
                raise InputError(
                    f"{name}: meta.kernels.{kernel}: v{version} differs from v{kernels[kernel]}"
                )
        for case in part.cases:
            if case.id in seen:
                raise InputError(f"{name}: cases: {case.id} is also in {seen[case.id]}")
            seen[case.id] = name
        if meta.shard:
            shards.add(meta.shard)
    counts = {Shard.parse(s).count for s in shards}
    whole = bool(shards) and len(counts) == 1 and len(shards) == next(iter(counts))
    # With the matrix known, a merge stands for the whole of it: shards that never arrived
    # leave their cases unmeasured (and the run incomplete) rather than shrinking the matrix.
    lost = bool(shards) and not whole and first.meta.matrix is not None and len(counts) == 1
    shard = None if whole or lost or not shards else "+".join(sorted(shards))
    metas = [p.meta for _, p in parts]
    finished = [m.finished_at for m in metas if m.finished_at]
    merged_meta = first.meta.model_copy(
        update={
            "started_at": min(m.started_at for m in metas),
            "finished_at": max(finished) if len(finished) == len(metas) else None,
            "complete": all(m.complete for m in metas) and not lost,
            "shard": shard,
            "kernels": kernels,
            "git": first.meta.git.model_copy(update={"dirty": _dirty(metas)}),
        }
    )
    return Results(meta=merged_meta, cases=[c for _, p in parts for c in p.cases])
