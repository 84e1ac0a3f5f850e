"""A report (``compare``, ``ab``) for a terminal: the verdict table within 120 columns.

Columns a terminal cannot hold are left out, the least needed first, and named under the
table (``--wide`` keeps them all); a run in the CPU interpreter says so above the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate

from ci_bench.report.render import (
    INTERPRETED_MARK,
    WIDTH,
    fit_columns,
    fmt_float,
    fmt_gbps,
    fmt_ms,
    fmt_ratio,
    fmt_util,
    interpreted_banner,
    interpreted_headers,
    tight_headers,
    wrap,
)
from ci_bench.report.rows import grouped, p_text, short_ref, short_shas
from ci_bench.schema import CaseVerdict, KernelSummary, Report

REPORT_HEADERS = (
    "case",
    "Pallas ms",
    "native ms",
    "speedup",
    "TFLOPS",
    "GB/s",
    "MFU / HBM",
    "bound",
    "baseline ms",
    "Δ",
    "A/B Δ",
    "MDC",
    "mem Δ",
    "verdict",
)
# Left out first: what the verdict does not rest on; the memory change (its regression is
# in the verdict cell) before the speed figures.
# The baseline's time stays: a Δ is unreadable without what it is relative to.
DROP_ORDER = (
    "bound",
    "GB/s",
    "native ms",
    "MFU / HBM",
    "TFLOPS",
    "mem Δ",
    "speedup",
    "MDC",
    "baseline ms",
)


# The legend under the table: every column it printed, in its order (none it left out).
MEANINGS = {
    "Pallas ms": "the mean of the Pallas kernel's timed calls",
    "native ms": "the same of its native (XLA) implementation",
    "speedup": "native ms / Pallas ms",
    "TFLOPS": "the SPEC's FLOPs over the Pallas time",
    "GB/s": "the SPEC's bytes over the Pallas time",
    "MFU / HBM": "that share of the device's peak compute or HBM bandwidth",
    "bound": "the roofline's limit (compute or memory)",
    "baseline ms": "the stored baseline's Pallas mean",
    "base ms": "the base ref's Pallas mean, measured in the same process",
    "Δ": "the change of the Pallas mean against the baseline",
    "A/B Δ": "the median paired head/base time ratio − 1 against the base ref, with its 95 % "
    "interval",
    "MDC": "the smallest change this comparison would detect (80 % power): a pass rules out "
    "larger changes, not smaller ones",
    "mem Δ": "the change of peak device memory against the baseline",
    "verdict": "the case's state (docs/VERDICTS.md)",
}
# In an A/B report the base ref's run takes the baseline's place, and Δ is the A/B's.
AB_MEANINGS = {
    "Δ": "the median of the paired head/base time ratios − 1 (rounds measured in turn), "
    "with its 95 % interval, not the ratio of the two means",
    "mem Δ": "the change of peak device memory, head against base",
}
AB_NAMES = {"baseline ms": "base ms"}


def legend(columns: Sequence[str], mode: str) -> str:
    """One line saying what each printed column holds (interpreter marks left off)."""
    meanings = {**MEANINGS, **(AB_MEANINGS if mode == "ab" else {})}
    named = [c.rstrip(INTERPRETED_MARK) for c in columns if c != "case"]
    return "Columns: " + "; ".join(f"{c}: {meanings[c]}" for c in named if c in meanings) + "."


def _label(v: CaseVerdict, mode: str) -> str:
    label = v.verdict
    if v.confirmed is False:
        label += " (not reproduced)"
    elif v.confirmed is True:
        label += " (confirmed)"
    elif v.p_value is not None and v.verdict not in ("pass",):
        label += f" ({p_text(v, mode)})"
    if v.memory_verdict == "regression" and v.verdict != "regression":
        label = f"memory regression; time: {label}"
    return label


def _ab_cell(v: CaseVerdict) -> str:
    if v.ratio is None:
        return "–"
    if v.ratio_low is None or v.ratio_high is None:
        return f"{v.ratio - 1:+.1%}"
    return f"{v.ratio - 1:+.1%} [{v.ratio_low - 1:+.1%}, {v.ratio_high - 1:+.1%}]"


def _memory_cell(v: CaseVerdict) -> str:
    if v.memory_change is None:
        return "–"
    flag = " (regression)" if v.memory_verdict == "regression" else ""
    return f"{v.memory_change:+.1%}{flag}"


def report_row(v: CaseVerdict, mode: str) -> list[str]:
    """Every column of one case; ``Δ`` is against the stored baseline (in an A/B report,
    the paired change), ``A/B Δ`` the paired head/base change with its 95 % interval."""
    cur = v.current
    metrics = cur.metrics if cur else None
    base_ms = v.baseline.pallas.mean_ms if v.baseline and v.baseline.pallas else None
    delta = "–" if v.mean_change is None else f"{v.mean_change:+.1%}"
    if mode == "ab" and v.mean_change is not None and None not in (v.ratio_low, v.ratio_high):
        # An A/B report's Δ is the paired change: its 95 % interval follows it.
        delta += f" [{v.ratio_low - 1:+.1%}, {v.ratio_high - 1:+.1%}]"  # type: ignore[operator]
    return [
        v.id,
        fmt_ms(cur.pallas.mean_ms if cur and cur.pallas else None),
        fmt_ms(cur.native.mean_ms if cur and cur.native else None),
        fmt_ratio(cur.speedup if cur else None),
        fmt_float(cur.tflops if cur else None, 4),
        fmt_gbps(metrics),
        fmt_util(metrics),
        (metrics.bound or "–") if metrics else "–",
        fmt_ms(base_ms),
        delta,
        _ab_cell(v),
        "–" if v.mdc is None else f"±{v.mdc:.1%}",
        _memory_cell(v),
        _label(v, mode),
    ]


def _headers(report: Report) -> list[str]:
    """The report's columns: no A/B column without an A/B, and in an A/B report ``Δ`` is the
    A/B's (its baseline column holds the base's time)."""
    headers = [h for h in REPORT_HEADERS if report.mode == "pr" or h != "A/B Δ"]
    if report.mode == "ab":
        headers = [AB_NAMES.get(h, h) for h in headers]
    return interpreted_headers(headers, report.meta.settings.interpret)


def verdict_table(
    verdicts: Sequence[CaseVerdict], report: Report, width: int | None = WIDTH
) -> tuple[str, list[str]]:
    headers = _headers(report)
    plain = [h for h in REPORT_HEADERS if report.mode == "pr" or h != "A/B Δ"]
    rows = []
    for v in verdicts:
        row = dict(zip(REPORT_HEADERS, report_row(v, report.mode), strict=True))
        rows.append([row[h] for h in plain])

    def render(hs: Sequence[str], body: list[list[str]]) -> str:
        align = ["left" if h in ("case", "verdict") else "right" for h in hs]
        with tight_headers():
            return tabulate(
                body, headers=list(hs), tablefmt="simple", disable_numparse=True, colalign=align
            )

    marked = dict(zip(plain, headers, strict=True))
    return fit_columns(headers, rows, render, [marked[h] for h in DROP_ORDER if h in marked], width)


def _provenance(k: KernelSummary) -> str:
    if k.baseline_version is None:
        return f"{k.kernel} v{k.version}: no baseline"
    p = k.provenance
    if p is None:
        return (
            f"{k.kernel} v{k.version}: baseline v{k.baseline_version} has no entry for this device"
        )
    commit = (p.commit or "-")[:12]
    return (
        f"{k.kernel} v{k.version} vs baseline v{k.baseline_version} (tag {p.tag or '-'}, "
        f"commit {commit}, measured {p.measured_at:%Y-%m-%d}, ci-bench {p.tool_version}, "
        f"profile {p.profile or 'ad-hoc'})"
    )


def footer(report: Report) -> str:
    meta = report.meta
    device = meta.device
    commit = (meta.git.commit or "-")[:12]
    where = f"{device.platform} · {device.device_kind}"
    if device.platform == "cpu":
        where += f" · {device.cpu_model}"
    lines = [
        f"Device: {where} · {device.software} · commit {commit} · "
        f"profile {meta.profile or 'ad-hoc'}",
    ]
    if report.mode in ("ab", "pr"):
        base = short_ref(report.base_ref)
        lines.append(f"A/B: head against {base}, paired rounds in one process")
    if report.mode != "ab":
        lines += [f"Baseline: {_provenance(k)}" for k in report.kernels]
    return "\n".join(lines)


def terminal_report(report: Report, *, wide: bool = False) -> str:
    """Plain-text report for a terminal: the interpreter's banner where it applies, the
    table (within ``WIDTH`` columns unless ``wide``), the headline, notes and footer."""
    width = None if wide else WIDTH
    table, left_out = verdict_table(grouped(report.cases), report, width)
    printed = [h for h in _headers(report) if h.rstrip(INTERPRETED_MARK) not in left_out]

    def fold(line: str) -> str:
        return line if width is None else wrap(line, width)

    settings = report.meta.settings
    banner = interpreted_banner(settings.interpreters(k.kernel for k in report.kernels))
    head = [fold(banner), ""] if settings.interpret else []
    notes = []
    if left_out:
        notes.append(f"(left out to fit {WIDTH} columns: {', '.join(left_out)}; --wide shows them)")
    notes.append(report.headline)
    notes += [f"{r.state}: {short_shas(r.reason)}" for r in report.run_states]
    if report.cases and not any(v.current and v.current.status == "ok" for v in report.cases):
        notes.append(
            "nothing measured (exit 3): every case failed; `ci-bench check-spec --run` runs "
            "each case of the pull request's profile once for correctness, without timing, "
            "and names what fails"
        )
    notes.append(legend(printed, report.mode))
    if report.mode == "baseline" and report.meta.device.platform == "cpu":
        notes.append(
            "On a shared CPU two runs drift apart by more than a real change: for an answer "
            "to trust, `ci-bench ab --base REF` times both versions in one process."
        )
    notes += [f"note: {k.kernel}: {short_shas(k.note)}" for k in report.kernels if k.note]
    notes += [f"warning: {short_shas(w)}" for k in report.kernels for w in k.warnings]
    notes += footer(report).splitlines()
    return "\n".join([*head, table, "", *map(fold, notes)]) + "\n"
