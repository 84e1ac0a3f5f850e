"""The PR comment's tables and their cells (pure): narrow enough for a 900 px column.

Every cell that holds untrusted text is escaped; every number's meaning is its header or a
footnote; a p-value names its comparison; a figure derived from interpreted Pallas times
carries the interpreter's mark.
"""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate

from ci_bench.judge.model import structural_only
from ci_bench.report.chart import delta_bar
from ci_bench.report.escape import md_id, md_inline
from ci_bench.report.render import (
    INTERPRETED_MARK,
    fmt_ms,
    fmt_ratio,
    fmt_util,
    interpreted_note,
)
from ci_bench.report.rows import VERDICT_ICONS, grouped, p_text
from ci_bench.schema import CaseVerdict, Report
from ci_bench.schema.chips import chip_label
from ci_bench.text import case_count


def pct(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1%}"


# No-break space: a figure and its interval (or its bar) wrap as one, not mid-interval.
NBSP = "\u00a0"


def ab_text(v: CaseVerdict) -> str:
    """The paired head/base change with its 95 % interval, unbreakable."""
    if v.ratio is None:
        return "–"
    if v.ratio_low is None or v.ratio_high is None:
        return pct(v.ratio - 1)
    low, high = v.ratio_low - 1, v.ratio_high - 1
    return f"{v.ratio - 1:+.1%}{NBSP}[{low:+.1%},{NBSP}{high:+.1%}]"


def with_bar(change: float | None, text: str, unit: float) -> str:
    """A Δ cell led by its bar (a code span: the marks keep their width)."""
    bar = delta_bar(change, unit)
    return f"`{bar}`{NBSP}{text}" if bar else text


def model_cell(v: CaseVerdict) -> str:
    """The cost model's change on the chip that moved most, compactly: ``–`` without a
    model, ``+1.2%`` within the threshold, ``📐 +97% TPU v5e`` structural, ``partial``
    where a side's model is partial (its structure compared alone, no time)."""
    m = v.model
    if structural_only(m):
        return "partial"
    if m is None or m.time_change is None:
        return "–"
    change = f"{m.time_change:+.0%}" if abs(m.time_change) >= 0.1 else f"{m.time_change:+.1%}"
    chip = f" {md_inline(chip_label(m.chip))}" if m.chip else ""  # "TPU 7", never a bare 7
    icon = {"structural": "📐 ", "improved": "🚀 ", "accepted": "🤝 "}.get(m.verdict, "")
    return f"{icon}{change}{chip if icon else ''}"


def verdict_cell(v: CaseVerdict, mode: str, *, model: bool = False) -> str:
    """State, how sure (confirmed, not reproduced, the p-value of a doubtful one with its
    comparison), a memory regression first; ``model``: a model verdict that moved too."""
    label = f"{VERDICT_ICONS[v.verdict]} {v.verdict}"
    if v.confirmed is True:
        label += ", confirmed"
    elif v.confirmed is False:
        label += ", not reproduced"
    elif v.min_repeats is not None:
        label += f", needs ≥{v.min_repeats} repeats"
    elif v.p_value is not None and v.verdict not in ("pass",):
        label += f" ({p_text(v, mode)})"
    if v.memory_verdict == "regression":
        label = f"❌ memory +{(v.memory_change or 0):.0%}; {label}"
    if model and v.model is not None and v.model.verdict in ("structural", "improved", "accepted"):
        label += f"; model {model_cell(v)}"
    return label


def case_cell(v: CaseVerdict, kernel_shown: bool = False) -> str:
    """The id as a code span; without its kernel prefix under the kernel's own heading."""
    text = v.id.split("/", 1)[1] if kernel_shown and "/" in v.id else v.id
    return md_id(text)


def table(headers: Sequence[str], rows: list[list[str]]) -> str:
    return tabulate(rows, headers=list(headers), tablefmt="github", disable_numparse=True)


def changed_table(cases: Sequence[CaseVerdict], mode: str, unit: float) -> str:
    """The cases a reviewer must see: the Δ that decides (the A/B's, or the baseline's in a
    baseline report) with its bar, and the verdict."""
    if mode in ("pr", "ab"):
        # The A/B decides a PR's rows; the baseline's Δ is in the full table, and in the
        # drift sections where it is what moved.
        headers = ["case", "Δ vs base (A/B)¹"]
        rows = [[case_cell(v), with_bar(_ab_change(v), ab_text(v), unit)] for v in cases]
    else:
        headers = ["case", "Δ vs baseline²"]
        rows = [[case_cell(v), with_bar(v.mean_change, pct(v.mean_change), unit)] for v in cases]
    headers.append("verdict")
    rows = [[*r, verdict_cell(v, mode, model=True)] for r, v in zip(rows, cases, strict=True)]
    return table(headers, rows)


def drift_table(cases: Sequence[CaseVerdict], unit: float) -> str:
    """Established drift: the baseline's Δ decides what moved, the A/B's says not this PR."""
    rows = [
        [
            case_cell(v),
            with_bar(v.mean_change, pct(v.mean_change), unit),
            ab_text(v),
            verdict_cell(v, "pr"),
        ]
        for v in cases
    ]
    return table(["case", "Δ vs baseline²", "Δ vs base (A/B)¹", "verdict"], rows)


def _ab_change(v: CaseVerdict) -> float | None:
    return None if v.ratio is None else v.ratio - 1


def _mdc(v: CaseVerdict) -> str:
    if v.min_repeats is not None:
        return f"needs ≥{v.min_repeats} repeats"
    return "–" if v.mdc is None else f"±{v.mdc:.1%}"


def _has_model(cases: Sequence[CaseVerdict]) -> bool:
    return any(v.model is not None for v in cases)


def _verdicts_table(cases: Sequence[CaseVerdict], mode: str) -> str:
    headers = ["case"]
    if mode != "ab":
        headers.append("Δ vs baseline²")
    if mode != "baseline":
        headers.append("Δ vs base (A/B)¹")
    headers.append("MDC⁴")
    model = _has_model(cases)
    if model:
        headers.append("model⁵")
    headers.append("verdict")
    rows = []
    for v in cases:
        row = [case_cell(v, kernel_shown=True)]
        if mode != "ab":
            row.append(pct(v.mean_change))
        if mode != "baseline":
            row.append(ab_text(v))
        row.append(_mdc(v))
        if model:
            row.append(model_cell(v))
        rows.append([*row, verdict_cell(v, mode)])
    return table(headers, rows)


def _figures_table(cases: Sequence[CaseVerdict], interpreted: bool) -> str:
    """The subject's figures, each variant timed beside it in the same rounds (results'
    ``implementations.others``) in a column of its own after the baseline's."""
    mark = INTERPRETED_MARK if interpreted else ""
    others = list(
        dict.fromkeys(n for v in cases if v.current for n in v.current.implementations.others)
    )
    headers = ["case", f"Pallas ms{mark}", "native ms"]
    headers += [f"{md_inline(name)} ms{mark}" for name in others]
    headers += [f"speedup{mark}", f"TFLOPS{mark}", f"MFU / HBM³{mark}"]
    rows = []
    for v in cases:
        cur = v.current
        timed = cur.implementations.others if cur else {}
        variants = [
            fmt_ms(t.mean_ms if (t := timed[n].timing if n in timed else None) else None)
            for n in others
        ]
        rows.append(
            [
                case_cell(v, kernel_shown=True),
                fmt_ms(cur.pallas.mean_ms if cur and cur.pallas else None),
                fmt_ms(cur.native.mean_ms if cur and cur.native else None),
                *variants,
                fmt_ratio(cur.speedup if cur else None),
                "–" if not cur or cur.tflops is None else f"{cur.tflops:.4g}",
                fmt_util(cur.metrics if cur else None),
            ]
        )
    return table(headers, rows)


def full_tables(report: Report) -> list[str]:
    """Per kernel (its modes together): the verdicts with both Δ, then the figures."""
    interpreted = report.meta.settings.interpret
    versions = {k.kernel: k.version for k in report.kernels}
    parts: list[str] = []
    for kernel in dict.fromkeys(v.kernel for v in grouped(report.cases)):
        mine = grouped([v for v in report.cases if v.kernel == kernel])
        version = f" v{md_inline(versions[kernel])}" if kernel in versions else ""
        parts += [f"**{md_inline(kernel)}**{version} · {case_count(len(mine))}", ""]
        parts += [_verdicts_table(mine, report.mode), "", _figures_table(mine, interpreted), ""]
    return parts


_AB_NOTE = (
    "¹ Δ vs base: head against the merge base of the PR, measured in the same job round by "
    "round; the median paired time ratio − 1, with its 95 % bootstrap interval."
)
_OTHER_NOTES = (
    "² Δ vs baseline: mean time against the stored baseline of the kernel's version "
    "(the specification's ±5 % rule).",
    "³ MFU for compute-bound cases, HBM bandwidth utilisation for memory-bound ones "
    "(– where the device's peak is unknown, e.g. CPUs).",
    "⁴ MDC: the smallest change this comparison would detect (80 % power); a pass rules "
    "out larger changes, not smaller ones.",
)
_MODEL_NOTE = (
    "⁵ model: the modelled TPU time read from the Pallas grid (HBM bytes, grid steps, VMEM; "
    "exact, the same on every machine) against the same reference, on the target chip "
    "that moved most; 📐 past the threshold; partial: a side's model is partial, its "
    "structure compared alone, no time."
)


def footnotes(report: Report) -> str:
    """The full tables' footnotes: each only where its column is."""
    notes = ([_AB_NOTE] if report.mode != "baseline" else []) + list(_OTHER_NOTES)
    if report.mode == "ab":
        notes.remove(_OTHER_NOTES[0])
    if _has_model(report.cases):
        notes.append(_MODEL_NOTE)
    if report.meta.settings.interpret:
        settings = report.meta.settings
        notes.append(interpreted_note(settings.interpreters(k.kernel for k in report.kernels)))
    return "  \n".join(notes)
