"""The cost model's verdict: a case's modelled TPU time against its reference (pure).

The model is exact (read from the traced Pallas grid, the same on every machine), so the
threshold alone decides: the specification's 5 % (``thresholds.model-slowdown``) on any
target chip is ``structural``, a fall past it ``improved``; no significance test, no
confirmation pass. A case whose VMEM does not fit a target chip is an ``error`` naming the
chip, the bytes and the limit: it would not compile there.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence

from ci_bench.schema import CaseModel, CaseVerdict, ChipChange, ModelChange, RunMeta, Thresholds
from ci_bench.schema.chips import on_chips
from ci_bench.schema.gpus import gpu_for_device_kind
from ci_bench.schema.model import TPU_DEVICE_KINDS, TRACES_DIFFERENTLY

KIB = 1024
# A measured time under this share of the model's physical floor on the runner's chip is an
# error: the floor (HBM bytes / bandwidth, MXU FLOPs / peak) leaves out every overhead, so
# only a broken timer or a kernel that skipped its work can beat it by that much.
FLOOR_SLACK = 0.5
_UPPER_BOUND_NOTES = ("costliest branch", "costliest one")
# What dma.EDGE_NOTE says of copies counted at their whole block: the HBM bytes are an upper
# bound, so the memory part is no floor; the MXU part still is.
_MEMORY_BOUND_NOTE = "counted at its whole block"


def target_chips(
    configured: Sequence[str], device_kind: str | None, available: Iterable[str]
) -> list[str]:
    """The chips a verdict is about: config ``target-chips``, else the runner's TPU, else
    every chip the model has (on a CPU or a GPU runner)."""
    have = list(dict.fromkeys(available))
    if configured:
        return [c for c in configured if c in have] or list(configured)
    runner = runner_chip(device_kind)
    if runner and runner in have:
        return [runner]
    return have


def runner_chip(device_kind: str | None) -> str | None:
    """The model's name for the runner's TPU chip or GPU (``schema.gpus``), None otherwise."""
    kind = (device_kind or "").strip()
    return TPU_DEVICE_KINDS.get(kind) or gpu_for_device_kind(kind)


def modelled(model: CaseModel | None) -> CaseModel | None:
    """The model when it is whole: a partial one (parts not modelled, of unknown cost) is
    never judged, so ``structural`` can neither pass nor fail on it."""
    return model if model is not None and model.status == "ok" else None


def vmem_errors(model: CaseModel | None, chips: Sequence[str]) -> list[str]:
    """Why the case does not fit each target chip's VMEM, one entry per chip (empty: it
    fits them all). A partial model's VMEM is a lower bound: past the limit it is an error
    all the same."""
    found = model if model is not None and model.status in ("ok", "partial") else None
    if found is None:
        return []
    misfits = [c for c in chips if c in found.chips and not found.chips[c].fits]
    return [found.chips[c].why_not or c for c in misfits]


def vmem_reason(model: CaseModel | None, chips: Sequence[str]) -> str | None:
    """The error of a case that does not fit VMEM, each reason said once with the chips it
    holds on (``does not fit VMEM: on all 8 target chips: 24.00 MiB of VMEM (blocks,
    scratch, the body's values) exceed its vmem_limit_bytes of 16.00 MiB``); None when it
    fits them all."""
    by_reason: dict[str, list[str]] = {}
    for name, why in zip(
        [c for c in chips if model and c in model.chips and not model.chips[c].fits],
        vmem_errors(model, chips),
        strict=True,
    ):
        by_reason.setdefault(why.removeprefix(f"{name}: "), []).append(name)
    if not by_reason:
        return None
    said = "; ".join(f"{on_chips(names, list(chips))}: {why}" for why, names in by_reason.items())
    return f"does not fit VMEM: {said}"


def _size(n: int) -> str:
    sign = "+" if n > 0 else "-" if n < 0 else "±"
    n = abs(n)
    if n >= 1024 * KIB:
        return f"{sign}{n / (1024 * KIB):.1f} MiB"
    return f"{sign}{n / KIB:.0f} KiB" if n >= KIB else f"{sign}{n} B"


def _finite(num: float, den: float) -> float:
    """``num / den`` held to a float the report can store: a quotient past the largest
    float (1e308 µs over a denormal) is written as that largest float, never as inf (which
    JSON cannot hold: the report's own reader refused it)."""
    try:
        ratio = num / den
    except OverflowError:  # int / int past a float
        return sys.float_info.max
    return ratio if math.isfinite(ratio) else sys.float_info.max


def judge_model(
    current: CaseModel | None,
    reference: CaseModel | None,
    chips: Sequence[str],
    t: Thresholds,
) -> ModelChange | None:
    """Current against reference on the target chips; None when either is not modelled or
    they share no chip. A partial model on either side is compared by its structure alone
    (``_structural_only``): never judged, ``pass``."""
    head, base = modelled(current), modelled(reference)
    if head is None or base is None:
        return _structural_only(current, reference, chips)
    common = [c for c in chips if c in head.chips and c in base.chips]
    if not common:
        return None
    if head.revision != base.revision:
        return _other_revision(head, base, common)
    changes = {}
    for name in common:
        h, b = head.chips[name], base.chips[name]
        change = _finite(h.modelled_us, b.modelled_us) - 1 if b.modelled_us > 0 else 0.0
        changes[name] = ChipChange(
            base_us=b.modelled_us, head_us=h.modelled_us, change=change, fits=h.fits
        )
    worst = max(common, key=lambda c: changes[c].change)
    best = min(common, key=lambda c: changes[c].change)
    if changes[worst].change > t.model_slowdown:
        chosen, verdict = worst, "structural"
    elif changes[best].change < -t.model_slowdown:
        chosen, verdict = best, "improved"
    else:
        chosen, verdict = worst, "pass"
    figures, detail = _structure(head, base, chosen)
    detail = f" ({detail})" if detail else ""
    reason = f"modelled {changes[chosen].change:+.1%} on {chosen}"
    if verdict == "pass":
        reason += f", within ±{t.model_slowdown:.0%}"
    reason += detail
    return ModelChange(
        verdict=verdict,  # type: ignore[arg-type]
        reason=reason,
        chip=chosen,
        time_change=changes[chosen].change,
        chips=changes,
        **figures,
    )


def _structure(head: CaseModel, base: CaseModel, chip: str | None = None) -> tuple[dict, str]:
    """What the grid moved on ``chip``, head against base: ``ModelChange``'s byte, step and
    VMEM fields, and the same said briefly (``structure_detail``). Each side's figures are
    that chip's own trace's (a kernel may trace per chip: a tuned chunk); a side that kept
    only its first chip's, and traced differently on others, has none for ``chip``: its
    steps and bytes are left out, not set against another chip's."""
    (h_hbm, h_steps, h_vmem), (b_hbm, b_steps, b_vmem) = (
        _chip_figures(head, chip, both=_per_chip(base, chip)),
        _chip_figures(base, chip, both=_per_chip(head, chip)),
    )
    known = None not in (h_steps, b_steps)
    hbm_ratio = _finite(h_hbm, b_hbm) if known and b_hbm else None
    steps_ratio = _finite(h_steps, b_steps) if known and b_steps else None
    dv = h_vmem - b_vmem
    figures = {
        "hbm_bytes": h_hbm - b_hbm if known else 0,
        "grid_steps": (h_steps or 0) - (b_steps or 0) if known else 0,
        "vmem_bytes": dv,
        "hbm_ratio": hbm_ratio,
        "steps_ratio": steps_ratio,
    }
    return figures, structure_detail(hbm_ratio, steps_ratio, dv)


def _per_chip(model: CaseModel, chip: str | None) -> bool:
    """Whether ``model`` kept ``chip``'s own steps and bytes (since they were kept per chip)."""
    own = model.chips.get(chip) if chip else None
    return own is not None and own.grid_steps is not None


def _chip_figures(model: CaseModel, chip: str | None, both: bool) -> tuple[int, int | None, int]:
    """HBM bytes, grid steps and VMEM of ``model`` on ``chip``: its own trace's where it kept
    them (the bytes where the other side did too, or where the case's are another chip's: a
    chip's bytes are its megacore split's), else the case's, which are every chip's unless
    the kernel traced differently (then the steps are None: unknown on ``chip``)."""
    own = model.chips.get(chip) if chip else None
    vmem = own.vmem_bytes if own is not None else (model.vmem_bytes or 0)
    differs = any(note.startswith(TRACES_DIFFERENTLY) for note in model.notes)
    if own is not None and _per_chip(model, chip):
        hbm = own.hbm_bytes if both or differs else (model.hbm_bytes or 0)
        return hbm, own.grid_steps, vmem
    return model.hbm_bytes or 0, None if differs else model.grid_steps, vmem


def structure_detail(hbm_ratio: float | None, steps_ratio: float | None, vmem_bytes: int) -> str:
    """A model change's structure said briefly: ``HBM x1.44, steps x2.00, VMEM -96 KiB``, the
    figures that moved (empty: none did)."""
    return ", ".join(
        part
        for part in (
            f"HBM x{hbm_ratio:.2f}" if hbm_ratio is not None and hbm_ratio != 1 else "",
            f"steps x{steps_ratio:.2f}" if steps_ratio is not None and steps_ratio != 1 else "",
            f"VMEM {_size(vmem_bytes)}" if vmem_bytes else "",
        )
        if part
    )


STRUCTURAL_ONLY = "structural only"


def _structural_only(
    current: CaseModel | None, reference: CaseModel | None, chips: Sequence[str]
) -> ModelChange | None:
    """A partial model (parts of unknown cost: no modelled time) against the other side,
    modelled or partial too: the grid steps, HBM bytes and VMEM compared (lower bounds on a
    partial side), no time. Never judged (``pass``, as ``_other_revision``), the partial
    side and what its model left out said first. None when a side is not modelled or they
    share no chip."""
    if current is None or reference is None:
        return None
    if {current.status, reference.status} - {"ok", "partial"}:
        return None
    if not any(c in current.chips and c in reference.chips for c in chips):
        return None
    head, base = _left_out(current), _left_out(reference)
    if head and base and head == base:
        where = f"on both sides: {head}"
    elif head and base:
        where = f"on both sides, this run: {head}, the reference: {base}"
    else:
        where = f"in this run: {head}" if head else f"in the reference: {base}"
    figures, detail = _structure(current, reference)
    reason = (
        f"{STRUCTURAL_ONLY} (partial model {where}; no time judged, its figures are lower "
        f"bounds): {detail or 'no structural change'}"
    )
    if current.revision != reference.revision:
        was = reference.revision if reference.revision is not None else "unrecorded"
        now = current.revision if current.revision is not None else "unrecorded"
        reason += f"; the reference was modelled by cost model revision {was}, this run by {now}"
    return ModelChange(verdict="pass", reason=reason, **figures)


def _left_out(model: CaseModel) -> str | None:
    """What a partial model left out, briefly (its first part, and how many more); None for
    a whole model."""
    if model.status != "partial":
        return None
    parts = model.not_modelled or [model.reason or "parts not modelled"]
    more = f" and {len(parts) - 1} more" if len(parts) > 1 else ""
    return f"{parts[0]}{more}"


def structural_only(change: ModelChange | None) -> bool:
    """Whether ``change`` compares structure alone (a partial model on a side): no time."""
    return (
        change is not None
        and change.time_change is None
        and change.reason.startswith(STRUCTURAL_ONLY)
    )


def structural_text(change: ModelChange) -> str:
    """A structural-only change's figures (``structure_detail``), or that none moved."""
    detail = structure_detail(change.hbm_ratio, change.steps_ratio, change.vmem_bytes)
    return f"{STRUCTURAL_ONLY}: {detail or 'no structural change'}"


def _other_revision(head: CaseModel, base: CaseModel, common: Sequence[str]) -> ModelChange:
    """A reference modelled by another revision of the cost model is not judged: its figures
    moved with the model (a new term, a measured rate), not with the kernel. ``pass``, with
    the change shown and why it does not count."""
    changes = {
        name: ChipChange(
            base_us=base.chips[name].modelled_us,
            head_us=head.chips[name].modelled_us,
            change=_finite(head.chips[name].modelled_us, base.chips[name].modelled_us) - 1
            if base.chips[name].modelled_us > 0
            else 0.0,
            fits=head.chips[name].fits,
        )
        for name in common
    }
    worst = max(common, key=lambda c: abs(changes[c].change))
    was = base.revision if base.revision is not None else "unrecorded"
    now = head.revision if head.revision is not None else "unrecorded"
    newer_base = (base.revision or 0) > (head.revision or 0)
    advice = (
        "upgrade ci-bench to the baseline's version to judge the model again"
        if newer_base
        else "remodel the baseline (ci-bench remodel) or promote a new one to judge the model again"
    )
    return ModelChange(
        verdict="pass",
        reason=(
            f"not judged: the reference was modelled by cost model revision {was}, this run "
            f"by {now} (modelled {changes[worst].change:+.1%} on {worst}); {advice}"
        ),
        chip=worst,
        time_change=changes[worst].change,
        chips=changes,
    )


def floor_error(
    model: CaseModel | None, measured_ms: float | None, runner: str | None
) -> str | None:
    """``error: faster than the chip allows`` when a time measured on chip ``runner`` is
    under ``FLOOR_SLACK`` x the model's physical floor there; None otherwise (no model for
    that chip, a partial model, or a model with upper-bound parts, e.g. a conditional's
    costliest branch). A partial model is never a floor: what it did not read has no known
    cost, and its figures can sit far from the chip's (issue 39). Copies counted at their
    whole block (emit_pipeline's edge blocks) make the HBM part an upper bound: the MXU
    part alone is the floor then."""
    if model is None or model.status != "ok" or runner not in model.chips:
        return None
    if measured_ms is None or any(u in n for n in model.notes for u in _UPPER_BOUND_NOTES):
        return None
    chip = model.chips[runner]  # type: ignore[index]
    # A GPU's floor is its tensor cores alone: its modelled bytes assume no L2 reuse between
    # waves, and repeated calls on arrays that fit L2 beat HBM legitimately.
    # The MXU part at the datasheet peak: compute_us may be charged at a measured rate below
    # it (mxu_fraction), which a kernel could beat; nothing beats the peak.
    mxu_us = chip.compute_us * (chip.mxu_fraction or 1.0)
    bytes_bounded = any(_MEMORY_BOUND_NOTE in n for n in model.notes)
    floor_us = mxu_us if chip.gpu is not None or bytes_bounded else max(mxu_us, chip.memory_us)
    measured_us = measured_ms * 1000
    if floor_us <= 0 or measured_us >= floor_us * FLOOR_SLACK:
        return None
    return (
        f"faster than the chip allows ({measured_us:,.1f} µs < floor {floor_us:,.1f} µs on "
        f"{runner}, by more than the {1 - FLOOR_SLACK:.0%} slack): a broken timer or a kernel "
        "that skipped its work"
    )


def with_model(
    verdict: CaseVerdict,
    reference: CaseModel | None,
    chips: Sequence[str],
    t: Thresholds,
    runner: str | None = None,
) -> CaseVerdict:
    """The case's verdict with the model's beside it; VMEM that does not fit a target chip
    makes the case an ``error`` (unless it already is one), and so does a time measured on
    TPU chip ``runner`` below the model's physical floor there."""
    current = verdict.current.model if verdict.current is not None else None
    update: dict = {}
    timing = verdict.current.pallas if verdict.current is not None else None
    too_fast = floor_error(current, timing.median_ms if timing else None, runner)
    if too_fast and verdict.verdict != "error":
        update["verdict"] = "error"
        update["reason"] = too_fast
    change = judge_model(current, reference, chips, t)
    if change is not None:
        update["model"] = change
    too_big = vmem_reason(current, chips)
    if too_big and update.get("verdict", verdict.verdict) != "error":
        update["verdict"] = "error"
        update["reason"] = too_big
    return verdict.model_copy(update=update) if update else verdict


def model_references(cases: Iterable[tuple[str, CaseModel | None]]) -> Mapping[str, CaseModel]:
    """Case id -> the first modelled reference among ``cases`` (any device: the model is
    the same on every machine), else the first partial one (compared by structure alone)."""
    found: dict[str, CaseModel] = {}
    partial: dict[str, CaseModel] = {}
    for case_id, model in cases:
        if case_id not in found and modelled(model) is not None:
            found[case_id] = model  # type: ignore[assignment]
        elif model is not None and model.status == "partial":
            partial.setdefault(case_id, model)
    return {**partial, **found}


def structural_count(verdicts: Iterable[CaseVerdict]) -> int:
    return sum(1 for v in verdicts if v.model is not None and v.model.verdict == "structural")


def judge_models(
    verdicts: list[CaseVerdict],
    references: Mapping[str, CaseModel],
    meta: RunMeta,
    thresholds: Thresholds,
    chips: Sequence[str] = (),
) -> list[CaseVerdict]:
    """Each verdict with the cost model's beside it (current against ``references``, or the
    verdict's own baseline), on the target chips: ``chips`` (config ``target-chips``), else
    the runner's TPU, else every chip modelled. A partial baseline model is the reference
    only where no whole one is: compared by its structure alone."""
    available = [
        name
        for v in verdicts
        if v.current is not None and v.current.model is not None
        for name in v.current.model.chips
    ]
    targets = target_chips(chips, meta.device.device_kind, available)
    runner = runner_chip(meta.device.device_kind)
    out = []
    for v in verdicts:
        if v.current is None:
            out.append(v)
            continue
        own = v.baseline.model if v.baseline is not None else None
        reference = own if own is not None and own.status == "ok" else references.get(v.id)
        if reference is None and own is not None and own.status == "partial":
            reference = own  # compared by its structure alone (``_structural_only``)
        out.append(with_model(v, reference, targets, thresholds, runner))
    return out
