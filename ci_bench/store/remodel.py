"""A baseline entry's cost models replaced by this revision's, its measurements untouched.

A new cost-model revision leaves every stored baseline "not judged" (its figures moved with
the model, not the kernel: ``judge.model``) until the next release promotes new numbers.
``ci-bench remodel`` models the entry's cases again, from the kernel code of the commit that
was measured, and this module swaps the models in: a pure function, then one locked
read-check-write of the file (``store.transaction``), so an entry promoted (or remodelled)
in between is never overwritten.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ci_bench.errors import InputError
from ci_bench.schema import BaselineEntry
from ci_bench.schema.baseline import Remodelled
from ci_bench.schema.model import MODEL_REVISION
from ci_bench.schema.withheld import WithheldModel
from ci_bench.store.baselines import load_baseline, merge_entry, write_promotions
from ci_bench.store.transaction import store_lock


@dataclass(frozen=True)
class Moved:
    """The case and chip whose modelled time moved most, and by how much (a fraction)."""

    case: str
    chip: str
    change: float


@dataclass(frozen=True)
class Remodel:
    """One entry's new models: what the entry becomes, and what changed."""

    action: Literal["remodelled", "unchanged"]
    entry: BaselineEntry
    revisions: tuple[int | None, ...]  # the revisions the entry's models had before
    moved: int  # cases with a modelled time that changed on some chip
    largest: Moved | None


def _time_moves(old: WithheldModel | None, new: WithheldModel) -> list[tuple[str, float]]:
    """(chip, fraction) for each chip whose modelled time moved from ``old`` to ``new``."""
    if old is None:
        return []
    moves = []
    for chip, now in new.chips.items():
        was = old.chips.get(chip)
        if was is None or was.modelled_us is None or now.modelled_us is None:
            continue
        if was.modelled_us != now.modelled_us and was.modelled_us > 0:
            moves.append((chip, now.modelled_us / was.modelled_us - 1))
    return moves


def _same(old: WithheldModel | None, new: WithheldModel) -> bool:
    """The same model, whatever the time it took to trace (``model_ms``)."""
    return old is not None and old.model_copy(update={"model_ms": None}) == new.model_copy(
        update={"model_ms": None}
    )


def check_remodellable(entry: BaselineEntry, models: Mapping[str, WithheldModel]) -> None:
    """An ``InputError`` (the entry left as it is) when the new models would lose what it
    holds: a case without a new model, a case the stored model modelled that the new one
    could not (old code the current jax refuses), or models of a newer revision than this
    ci-bench's (an older ci-bench would downgrade them)."""
    newer = [c.model.revision for c in entry.cases if c.model and c.model.revision]
    if newer and max(newer) > MODEL_REVISION:
        raise InputError(
            f"modelled by a newer ci-bench (cost model revision {max(newer)}, this one "
            f"{MODEL_REVISION}): upgrade ci-bench to remodel it"
        )
    for case in entry.cases:
        new = models.get(case.id)
        if new is None:
            raise InputError(f"case {case.id} got no new model")
        if new.status == "not_modelled" and case.model and case.model.status != "not_modelled":
            raise InputError(f"case {case.id} could not be modelled: {new.reason}")


def remodel_entry(
    entry: BaselineEntry, models: Mapping[str, WithheldModel], info: Remodelled
) -> Remodel:
    """``entry`` with each case's model from ``models`` (by case id), its provenance saying
    so; ``unchanged`` when every model is already what it would be (same revision, same
    figures): the file is then left byte-identical. ``check_remodellable`` first."""
    check_remodellable(entry, models)
    revisions = tuple(dict.fromkeys(c.model.revision if c.model else None for c in entry.cases))
    moved, largest = 0, None
    for case in entry.cases:
        moves = _time_moves(case.model, models[case.id])
        moved += bool(moves)
        for chip, change in moves:
            if largest is None or abs(change) > abs(largest.change):
                largest = Moved(case.id, chip, change)
    if all(_same(case.model, models[case.id]) for case in entry.cases):
        return Remodel("unchanged", entry, revisions, 0, None)
    cases = [c.model_copy(update={"model": models[c.id]}) for c in entry.cases]
    provenance = entry.provenance.model_copy(update={"remodelled": info})
    new = BaselineEntry.model_validate(
        entry.model_copy(update={"cases": cases, "provenance": provenance}).model_dump()
    )
    return Remodel("remodelled", new, revisions, moved, largest)


def write_remodel(path: Path, was: BaselineEntry, remodel: Remodel) -> None:
    """Write ``remodel``'s entry into the file at ``path`` under the store's lock, provided
    the file's entry is still ``was``, the one that was modelled: a promotion or another
    remodel since then is never lost."""
    with store_lock(path.parent):
        now = load_baseline(path)
        if now.entry_for(was.device) != was:
            raise InputError(
                f"{path}: its {was.device.identity} entry changed while it was being "
                "remodelled (promoted again?); nothing written to it, run remodel again"
            )
        replaced = merge_entry(now, now.kernel, now.version, remodel.entry, force=True)
        write_promotions(path.parent, [replaced])
