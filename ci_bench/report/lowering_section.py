"""The sticky comment's lowering section (pure): what the lowering job found, in lines that
never contradict each other.

One line per finding, each saying one thing: a case that does not export is "does not
lower"; one that exports but whose blocks pass a chip's VMEM budget is "does not fit VMEM",
with the figures and what to change; the cost model's faster and slower cases under an
emoji and a word that say which; "no structural change" only when the model found no
change at all. A reason shared by several chips is said once ("on all 8 target chips");
chips are named as chips (``TPU 7``); nothing is cut mid-word. Every list is capped
("… and N more") and the whole section kept to a budget: the full text is in the lowering
run's job summary and artifact. The files are the pull request's claim: every text escaped.
"""

from __future__ import annotations

from collections.abc import Sequence

from ci_bench.judge.model import structural_only, structural_text
from ci_bench.report.escape import md_id, md_inline
from ci_bench.schema import Results
from ci_bench.schema.analysis import Analysis, AnalyzedCase
from ci_bench.schema.chips import chip_label, chip_list, on_chips
from ci_bench.schema.lowering import LoweredCase, LoweringResults, TilingHint
from ci_bench.schema.model import CaseModel
from ci_bench.schema.report import ModelChange
from ci_bench.text import case_count

HEADING = "#### Lowering, cost model and correctness (no accelerator)"
# Where the whole section is when the comment shows part of it.
WHERE = "the lowering run's job summary and its `ci-bench-lowering` artifact"
VMEM_PREFIX = "does not fit VMEM: "
_PLATFORMS = {"tpu": "TPU", "cuda": "CUDA"}
# Past this many rows a list folds into <details>; past FOLDED times that, it is cut.
FOLDED = 5


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.2f} MiB"


def does_not_fit(case: LoweredCase) -> bool:
    """A case that exported fine and whose VMEM does not fit a target chip (the lowering
    job's VMEM check): not a lowering failure, and said apart from one."""
    return case.status == "error" and (case.error or "").startswith(VMEM_PREFIX)


def _capped(rows: list[str], max_rows: int | None, where: str) -> list[str]:
    if max_rows is None or len(rows) <= max_rows:
        return rows
    return [*rows[:max_rows], f"- … and {len(rows) - max_rows} more (all of them: {where})"]


def vmem_advice(model: CaseModel | None, chips: Sequence[str]) -> str:
    """The figures behind a VMEM misfit and what to change: the kernel's
    ``vmem_limit_bytes`` (or the chip's VMEM it cannot pass), and the block that dominates."""
    if model is None or not model.calls:
        return ""
    misfits = [c for c in chips if c in model.chips and not model.chips[c].fits]
    if not misfits:
        return ""
    call = max(model.calls, key=lambda c: c.vmem_bytes)
    need = call.vmem_bytes
    block = ""
    top = max(call.operands, key=lambda o: o.vmem_bytes, default=None)
    if top is not None and top.vmem_bytes >= call.scratch_bytes:
        shape = "×".join(str(d) for d in top.block_shape or [])
        block = (
            f"the largest block is {top.origin} ({shape} {top.dtype}, {top.buffers} "
            f"buffers: {_mib(top.vmem_bytes)})"
        )
    elif call.scratch_bytes:
        block = f"the largest part is its VMEM scratch ({_mib(call.scratch_bytes)})"
    per = {c: model.chips[c] for c in misfits}
    capacity = min(c.vmem_capacity_bytes for c in per.values())
    raise_ = [n for n, c in per.items() if need <= c.vmem_capacity_bytes]
    shrink = [n for n, c in per.items() if need > c.vmem_capacity_bytes]
    limit = "its" if next(iter(per.values())).vmem_limit_source == "kernel" else "a"
    if any(c.smem_bytes > c.smem_capacity_bytes for c in per.values()):
        what = "move scalar data out of SMEM (scalar prefetch, SMEM blocks and scratch)"
    elif any(
        c.vmem_limit_source == "kernel" and c.vmem_limit_bytes > capacity for c in per.values()
    ):
        what = f"lower the kernel's vmem_limit_bytes to at most {_mib(capacity)}"
    elif not shrink:
        what = (
            f"{limit} vmem_limit_bytes (pltpu.CompilerParams) of at least {_mib(need)}, "
            "or smaller blocks"
        )
    elif not raise_:
        what = f"smaller blocks: {_mib(need)} is more than the {_mib(capacity)} of VMEM there"
    else:
        small = min(per[n].vmem_capacity_bytes for n in shrink)
        what = (
            f"{limit} vmem_limit_bytes (pltpu.CompilerParams) of at least {_mib(need)} "
            f"{on_chips(raise_, list(chips))}; smaller blocks {on_chips(shrink, list(chips))}, "
            f"whose VMEM is {_mib(small)}"
        )
    return f"{block + '. ' if block else ''}What to change: {what}"


def _vmem_row(case: LoweredCase, chips: Sequence[str]) -> str:
    why = (case.error or "").removeprefix(VMEM_PREFIX)
    advice = vmem_advice(case.model, chips)
    return f"- {md_id(case.id)}: {md_inline(why, 400)}" + (
        f"; {md_inline(advice, 400)}" if advice else ""
    )


def model_change_text(change: ModelChange, faster: bool) -> str:
    """The model's change on the chip that moved most, and on how many chips it moved so."""
    moved = [n for n, c in change.chips.items() if (c.change < 0) == faster and c.change != 0]
    word = "faster" if faster else "slower"
    parts = [f"modelled {change.time_change or 0:+.1%} on {chip_label(change.chip or '?')}"]
    if len(moved) > 1:
        parts.append(f"{word} {on_chips(moved, list(change.chips))}")
    detail = [
        f"HBM ×{change.hbm_ratio:.2f}" if change.hbm_ratio not in (None, 1) else "",
        f"grid steps ×{change.steps_ratio:.2f}" if change.steps_ratio not in (None, 1) else "",
        f"VMEM {change.vmem_bytes / 1024:+,.0f} KiB" if change.vmem_bytes else "",
    ]
    return "; ".join(parts + [d for d in detail if d])


def _lowering_lines(lowering: LoweringResults, max_rows: int | None, where: str) -> list[str]:
    total, platform = len(lowering.cases), _PLATFORMS.get(lowering.meta.platform, "TPU")
    chips = list(lowering.meta.chips)
    host = [c for c in lowering.cases if c.status == "host_error"]
    vmem = [c for c in lowering.cases if does_not_fit(c)]
    failed = [c for c in lowering.cases if c.status == "error" and not does_not_fit(c)]
    lines = []
    if host:
        lines.append(
            f"⚠️ {len(host)} of {total} cases could not be lowered on this runner "
            f"(`host_error`: the machine, not the kernel): {md_inline(host[0].error or '')}"
        )
    if not total:
        return [f"⚠️ the lowering file lists no case: nothing was lowered for {platform}"]
    lowered = total - len(host) - len(failed)
    on = f" {on_chips(chips, chips)}" if chips else ""
    if lowered == total == 1:
        lines.append(f"✅ the 1 case lowers for {platform}{on}")
    elif lowered == total:
        lines.append(f"✅ all {case_count(total)} lower for {platform}{on}")
    elif lowered:
        lines.append(f"✅ {lowered} of {case_count(total)} lower for {platform}{on}")
    if failed:
        lines.append(f"❌ {len(failed)} of {case_count(total)} do not lower for {platform}:")
        rows = [f"- {md_id(c.id)}: {md_inline(c.error or 'error')}" for c in failed]
        lines += _capped(rows, max_rows, where)
    if vmem:
        lines.append(
            f"❌ {len(vmem)} of {case_count(total)} do not fit VMEM (they lower; the TPU "
            "compiler would refuse them):"
        )
        lines += _capped([_vmem_row(c, chips) for c in vmem], max_rows, where)
    return lines


def _partial_text(case: AnalyzedCase, base: str) -> str:
    """Why a case's model is partial and, against the base, its structure alone; a whole
    case against a partial base model: what that comparison says."""
    change = case.against
    if case.status != "partial":
        return change.reason if change else ""
    if change is None or not structural_only(change):
        return case.reason or ""
    return f"{case.reason}; {structural_text(change)} against {base}"


def _model_lines(analysis: Analysis, max_rows: int | None, where: str) -> list[str]:
    base = md_inline(analysis.meta.base_ref or "")

    def against(case: AnalyzedCase, verdict: str) -> bool:
        return case.against is not None and case.against.verdict == verdict

    faster = [c for c in analysis.cases if against(c, "improved")]
    slower = [c for c in analysis.cases if against(c, "structural")]
    # Partial on either side: compared by structure alone, never a time (a partial base
    # model's case is listed by what the comparison says).
    partial = [c for c in analysis.cases if c.status == "partial" or structural_only(c.against)]
    lines = []
    if slower:
        lines.append(
            f"📐 {case_count(len(slower))} slower on TPU by the cost model against {base} "
            "(a structural change):"
        )
        rows = [
            f"- {md_id(c.id)}: {md_inline(model_change_text(c.against, False))}" for c in slower
        ]
        lines += _capped(rows, max_rows, where)
    if faster:
        lines.append(
            f"🚀 {case_count(len(faster))} faster on TPU by the cost model against {base}:"
        )
        rows = [f"- {md_id(c.id)}: {md_inline(model_change_text(c.against, True))}" for c in faster]
        lines += _capped(rows, max_rows, where)
    if partial:
        lines.append(
            f"⚠️ {case_count(len(partial))} with a partial model (no modelled time, not judged):"
        )
        rows = [
            f"- {md_id(c.id)}: {md_inline(_partial_text(c, analysis.meta.base_ref or ''))}"
            for c in partial
        ]
        lines += _capped(rows, max_rows, where)
    # Both sides traced a kernel from one file (issue 37): nothing was compared, so never
    # "no structural change".
    same = [r for r in analysis.run_states if r.state == "same-code"]
    lines += [f"🪞 `same-code`: {md_inline(r.reason)}" for r in same]
    # The base's kernel code hung, crashed or failed (issue 57): its kernels were not
    # compared, so never "no structural change" for them.
    failed = analysis.meta.base_failures
    lines += [
        f"⚠️ not compared ({', '.join(md_inline(k) for k in sorted(failed) if failed[k] == why)}):"
        f" {md_inline(why)}"
        for why in dict.fromkeys(failed.values())
    ]
    if not faster and not slower and not same and not failed:
        # A partial case's structure that moved is a change, though never judged.
        moved = any(
            c.against and (c.against.hbm_bytes or c.against.grid_steps or c.against.vmem_bytes)
            for c in partial
        )
        whole = " in the wholly modelled cases" if moved else ""
        lines.append(f"✅ no structural change by the cost model against {base}{whole}")
    return lines


def tiling_lines(
    lowering: LoweringResults, threshold: float, max_rows: int | None, where: str = WHERE
) -> list[str]:
    """One line per case whose modelled best tiling beats the shipped default by more than
    ``threshold`` (on the chip where it gains most, the other such chips named), escaped:
    the file is the pull request's claim. Folded past ``max_rows``, cut past ``FOLDED``
    times that; never a verdict."""
    from ci_bench.report.tune import faster_sentence

    above: dict[str, list[TilingHint]] = {}
    for h in lowering.tiling:
        if faster_sentence(h.chip, h.config, h.modelled_us, h.default_us, threshold):
            above.setdefault(h.case, []).append(h)
    rows = []
    for case, hints in above.items():
        top = max(hints, key=lambda h: h.default_us / h.modelled_us)
        chip = chip_label(top.chip)
        text = faster_sentence(
            chip, top.config, top.modelled_us, top.default_us, threshold, top.tied, top.tie_knobs
        )
        others = [h.chip for h in hints if h is not top]
        also = f" (also faster on {chip_list(others)})" if others else ""
        rows.append(f"- {md_id(case)}: {md_inline(f'{text}{also}')}")
    if not rows:
        return []
    head = (
        f"💡 a faster tiling by the cost model (> {threshold:g}x; a hint) in "
        f"{case_count(len(rows))}:"
    )
    if max_rows is None or len(rows) <= max_rows:
        return [head, *rows]
    rows = _capped(rows, max_rows * FOLDED, where)
    return [head, "", "<details><summary>all of them</summary>", "", *rows, "", "</details>", ""]


def _smoke_lines(smoke: Results, max_rows: int | None, where: str) -> list[str]:
    wrong = [c for c in smoke.cases if c.status != "ok"]
    n = len(smoke.cases)
    if not wrong:
        are = "is" if n == 1 else "are"
        return [f"✅ the smoke profile's {case_count(n)} {are} correct in the CPU interpreter"]
    rows = [f"- {md_id(c.id)}: {md_inline(c.error or 'error')}" for c in wrong]
    return [
        f"❌ {len(wrong)} of {n} smoke cases fail in the CPU interpreter:",
        *_capped(rows, max_rows, where),
    ]


def lowering_lines(
    lowering: LoweringResults | None,
    smoke: Results | None,
    analysis: Analysis | None,
    *,
    tune_hint: float,
    max_rows: int | None,
    where: str = WHERE,
) -> list[str]:
    """The section's findings, every list at most ``max_rows`` long (None: all)."""
    lines = [HEADING, ""]
    if lowering is not None:
        lines += _lowering_lines(lowering, max_rows, where)
    if analysis is not None and analysis.meta.base_ref:
        lines += _model_lines(analysis, max_rows, where)
    if lowering is not None and tune_hint:
        lines += tiling_lines(lowering, tune_hint, max_rows, where)
    if smoke is not None:
        lines += _smoke_lines(smoke, max_rows, where)
    return lines
