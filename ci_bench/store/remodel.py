"""A baseline entry's cost models replaced by a newer revision's, its measurements untouched.

A new cost-model revision leaves every stored baseline "not judged" (its figures moved with
the model, not the kernel: ``judge.model``) until the next release promotes new numbers.
``ci-bench remodel`` models the entry's cases again, from the kernel code of the commit that
was measured, and this module swaps the models in: pure functions, then one locked
read-check-write of the file (``store.transaction``), so a promotion in between is never
overwritten.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ci_bench.errors import InputError
from ci_bench.schema import BaselineEntry, BaselineFile
from ci_bench.schema.baseline import Remodelled
from ci_bench.schema.withheld import WithheldModel
from ci_bench.store.baselines import Promotion, load_baseline, write_promotions

Action = Literal["remodelled", "unchanged"]


@dataclass(frozen=True)
class Moved:
    """The case and chip whose modelled time moved most, and by how much (a fraction)."""

    case: str
    chip: str
    change: float


@dataclass(frozen=True)
class Remodel:
    """One entry's new models: what the file becomes, and what changed."""

    device: str
    action: Action
    entry: BaselineEntry
    revisions: tuple[int | None, ...]  # the revisions the entry's models had before
    cases: int
    moved: int  # cases with a modelled time that changed on some chip
    largest: Moved | None


def _time_moves(old: WithheldModel | None, new: WithheldModel) -> list[Moved]:
    """How each chip's modelled time moved from ``old`` to ``new`` (known on both sides)."""
    if old is None:
        return []
    moves = []
    for chip, now in new.chips.items():
        was = old.chips.get(chip)
        if was is None or was.modelled_us is None or now.modelled_us is None:
            continue
        if was.modelled_us != now.modelled_us and was.modelled_us > 0:
            moves.append(Moved("", chip, now.modelled_us / was.modelled_us - 1))
    return moves


def _same(old: WithheldModel | None, new: WithheldModel) -> bool:
    """The same model, whatever the time it took to trace (``model_ms``)."""
    return old is not None and old.model_copy(update={"model_ms": None}) == new.model_copy(
        update={"model_ms": None}
    )


def remodel_entry(
    entry: BaselineEntry, models: Mapping[str, WithheldModel], info: Remodelled
) -> Remodel:
    """``entry`` with each case's model from ``models`` (by case id; every case needs one),
    its provenance saying so. ``unchanged`` when every model is already what it would be
    (same revision, same figures): the file is then left byte-identical."""
    missing = [c.id for c in entry.cases if c.id not in models]
    if missing:
        raise InputError(f"no new model for {len(missing)} case(s), e.g. {missing[0]}")
    revisions = tuple(dict.fromkeys(c.model.revision if c.model else None for c in entry.cases))
    moved, largest = 0, None
    for case in entry.cases:
        moves = [Moved(case.id, m.chip, m.change) for m in _time_moves(case.model, models[case.id])]
        moved += bool(moves)
        for move in moves:
            if largest is None or abs(move.change) > abs(largest.change):
                largest = move
    if all(_same(case.model, models[case.id]) for case in entry.cases):
        return Remodel(
            entry.device.identity, "unchanged", entry, revisions, len(entry.cases), 0, None
        )
    cases = [c.model_copy(update={"model": models[c.id]}) for c in entry.cases]
    provenance = entry.provenance.model_copy(update={"remodelled": info})
    new = BaselineEntry.model_validate(
        entry.model_copy(update={"cases": cases, "provenance": provenance}).model_dump()
    )
    return Remodel(entry.device.identity, "remodelled", new, revisions, len(cases), moved, largest)


def with_entry(baseline: BaselineFile, entry: BaselineEntry) -> BaselineFile:
    """``baseline`` with the entry of ``entry``'s device replaced by it, others kept."""
    entries = [entry if e.device.identity == entry.device.identity else e for e in baseline.entries]
    return BaselineFile.model_validate(
        baseline.model_copy(update={"entries": entries}).model_dump()
        | {"schema_version": BaselineFile.model_fields["schema_version"].default}
    )


def write_remodel(path: Path, read: BaselineFile, remodel: Remodel) -> None:
    """Write ``remodel``'s entry into the file at ``path`` under the store's lock, provided
    the entry is still the one that was modelled (a promotion since then is never lost)."""
    from ci_bench.store.transaction import store_lock

    with store_lock(path.parent):
        now = load_baseline(path)
        current = now.entry_for(remodel.entry.device)
        was = read.entry_for(remodel.entry.device)
        if (
            current is None
            or was is None
            or current.provenance.measured_at != (was.provenance.measured_at)
        ):
            raise InputError(
                f"{path}: its {remodel.device} entry changed while it was being remodelled "
                "(promoted again?); nothing written, run remodel again"
            )
        document = with_entry(now, remodel.entry)
        promotion = Promotion(now.kernel, now.version, remodel.device, "replaced", document)
        write_promotions(path.parent, [promotion])
