"""Pure rendering of results: terminal / markdown tables via tabulate, no I/O."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import tabulate as tabulate_module
from tabulate import tabulate

from ci_bench.report.chart import mermaid_delta_chart
from ci_bench.report.escape import md_inline
from ci_bench.schema import (
    VERDICT_PRECEDENCE,
    VERDICTS,
    CaseResult,
    CaseVerdict,
    KernelSummary,
    Metrics,
    Report,
    Results,
    TimingStats,
)


def fmt_ms(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.3f}"
    return f"{value:.4f}"


def fmt_ratio(value: float | None, suffix: str = "×") -> str:
    return "–" if value is None else f"{value:.2f}{suffix}"


def fmt_float(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    if value != 0 and abs(value) < 10**-digits:
        return f"{value:.{digits - 1}e}"
    return f"{value:.{digits}f}"


def fmt_pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def fmt_gbps(metrics: Metrics | None) -> str:
    return "–" if metrics is None else f"{metrics.achieved_gbps:.4g}"


def fmt_util(metrics: Metrics | None) -> str:
    """The headline utilisation: HBM % for memory-bound (or vector-unit) kernels, else MFU.

    Memory-bound means the roofline says so; with unknown peaks (CPU) the SPEC's compute
    unit decides. The other figure stays in the JSON.
    """
    if metrics is None:
        return "–"
    if metrics.headline == "hbm":
        value = metrics.hbm_utilization
        return "–" if value is None else f"{fmt_pct(value)} HBM"
    return "–" if metrics.mfu is None else f"{fmt_pct(metrics.mfu)} MFU"


# Short mode labels for tables; the case id spells the mode out (``.../backward``).
MODE_LABELS = {"forward": "fwd", "backward": "bwd", "forward+backward": "fwd+bwd"}
RUN_HEADERS = (
    "case",
    "mode",
    "Pallas ms",  # mean ± std
    "native ms",
    "speedup",
    "TFLOPS",
    "GB/s",
    "MFU/HBM",
    "compile ms",
)
# An implementation other than the subject and the baseline: a row under its case.
OTHER_MARK = "↳ "


def _point(case_id: str, mode: str) -> str:
    """The id without its mode suffix: the mode has its own column."""
    suffix = f"/{mode}"
    return case_id[: -len(suffix)] if mode != "forward" and case_id.endswith(suffix) else case_id


def fmt_std(value: float) -> str:
    """A spread to two significant figures: it is known no better."""
    if value >= 10:
        return f"{value:.0f}"
    if value >= 1:
        return f"{value:.1f}"
    return f"{value:.2g}"


def _timing(stats: TimingStats | None) -> str:
    return "–" if stats is None else f"{fmt_ms(stats.mean_ms)} ±{fmt_std(stats.std_ms)}"


def run_row(case: CaseResult) -> list[str]:
    """One case: the subject's figures (errors say so; the message follows the table)."""
    metrics = case.metrics
    return [
        _point(case.id, case.mode),
        MODE_LABELS.get(case.mode, case.mode),
        "error (below)" if case.status != "ok" else _timing(case.pallas),
        fmt_ms(case.native.mean_ms if case.native else None),
        fmt_ratio(case.speedup),
        fmt_float(case.tflops, 4),
        fmt_gbps(metrics),
        fmt_util(metrics),
        fmt_ms(case.compile.pallas_ms),
    ]


def other_rows(case: CaseResult) -> list[list[str]]:
    """The case's other implementations, one row each under it: time, speedup over the
    same baseline, TFLOPS and GB/s of the same cost model, compile time."""
    rows = []
    metrics = case.metrics
    for name, other in case.implementations.others.items():
        stats = other.timing
        seconds = stats.mean_ms / 1e3 if stats and stats.mean_ms > 0 else None
        tflops = metrics.flops / seconds / 1e12 if metrics and seconds else None
        gbps = f"{metrics.bytes_accessed / seconds / 1e9:.4g}" if metrics and seconds else "–"
        rows.append(
            [
                f"{OTHER_MARK}{name}",
                MODE_LABELS.get(case.mode, case.mode),
                _timing(stats),
                "",
                fmt_ratio(other.speedup),
                fmt_float(tflops, 4),
                gbps,
                "",
                fmt_ms(other.compile_ms),
            ]
        )
    return rows


def _cells(rows: list[list[str]], tablefmt: str) -> list[list[str]]:
    """Markdown tables carry untrusted text (ids, errors): every cell escaped, one line."""
    if tablefmt != "github":
        return rows
    return [[md_inline(cell) for cell in row] for row in rows]


@contextlib.contextmanager
def _tight_headers() -> Iterator[None]:
    """tabulate widens every column to its header plus 2; the run table's columns are set
    by their values instead, so that it stays within 120 columns."""
    saved = tabulate_module.MIN_PADDING
    tabulate_module.MIN_PADDING = 0
    try:
        yield
    finally:
        tabulate_module.MIN_PADDING = saved


def implementation_notes(cases: Sequence[CaseResult]) -> list[str]:
    """Per kernel whose subject or baseline is not pallas / native, or that times others:
    which implementation each column holds."""
    notes: dict[str, str] = {}
    for c in cases:
        names = c.implementations
        if (names.subject, names.baseline) == ("pallas", "native") and not names.others:
            continue
        others = f"; {OTHER_MARK}rows: {', '.join(names.others)}" if names.others else ""
        notes.setdefault(
            c.kernel,
            f"{c.kernel}: Pallas ms is {names.subject} (the subject), native ms is "
            f"{names.baseline} (the baseline){others}",
        )
    return list(notes.values())


def results_table(cases: Sequence[CaseResult], tablefmt: str = "simple") -> str:
    """One row per case (a kernel's modes side by side), each other implementation in a
    row under its case; then which implementation each column holds where a kernel names
    its own, then every error with its message."""
    rows = [row for c in cases for row in (run_row(c), *other_rows(c))]
    with _tight_headers():
        table = tabulate(
            _cells(rows, tablefmt),
            headers=RUN_HEADERS,
            tablefmt=tablefmt,
            disable_numparse=True,
            colalign=("left", "left", *("right",) * (len(RUN_HEADERS) - 2)),
        )
    lines = [table]
    escape = md_inline if tablefmt == "github" else (lambda text: text)
    notes = implementation_notes(cases)
    errors = [c for c in cases if c.status != "ok"]
    if notes or errors:
        lines.append("")
    lines += [escape(n) for n in notes]
    lines += [f"{escape(c.id)}: error: {escape(c.error or 'error')}" for c in errors]
    return "\n".join(lines)


def run_summary(results: Results) -> str:
    """One line: what ran where."""
    ok = sum(c.status == "ok" for c in results.cases)
    device = results.meta.device
    return (
        f"{ok}/{len(results.cases)} cases ok on {device.platform} ({device.device_kind}), "
        f"{device.software}, profile {results.meta.profile or 'ad-hoc'}, "
        f"warmup {results.meta.settings.warmup}, repeats {results.meta.settings.repeats}"
    )


VERDICT_ICONS = {s.name: s.icon for s in VERDICTS}
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
    "MDC",
    "mem Δ",
    "verdict",
)
WORTH_A_LOOK = ("regression", "error", "missing", "noisy", "improved", "new", "incomparable")


def ordered(verdicts: Sequence[CaseVerdict]) -> list[CaseVerdict]:
    """Worst first (verdict precedence), then the largest change first."""
    rank = {v: i for i, v in enumerate(VERDICT_PRECEDENCE)}

    def key(v: CaseVerdict) -> tuple[int, float, str]:
        worst = 0 if v.memory_verdict == "regression" else rank[v.verdict]
        return worst, -abs(v.mean_change or 0.0), v.id

    return sorted(verdicts, key=key)


MODE_ORDER = {mode: i for i, mode in enumerate(MODE_LABELS)}


def _mode_of(case_id: str) -> str:
    last = case_id.rsplit("/", 1)[-1]
    return last if last in MODE_ORDER else "forward"


def grouped(verdicts: Sequence[CaseVerdict]) -> list[CaseVerdict]:
    """``ordered``, with each case's modes kept together: a point's forward, backward and
    forward+backward rows in that order, the group placed where its worst row would be."""
    rank = {id(v): i for i, v in enumerate(ordered(verdicts))}
    groups: dict[str, list[CaseVerdict]] = {}
    for v in verdicts:
        groups.setdefault(_point(v.id, _mode_of(v.id)), []).append(v)
    first = {key: min(rank[id(v)] for v in group) for key, group in groups.items()}
    return [
        v
        for key in sorted(groups, key=first.__getitem__)
        for v in sorted(groups[key], key=lambda v: MODE_ORDER[_mode_of(v.id)])
    ]


def report_row(v: CaseVerdict, *, icons: bool = True) -> list[str]:
    cur = v.current
    metrics = cur.metrics if cur else None
    base_ms = v.baseline.pallas.mean_ms if v.baseline and v.baseline.pallas else None
    label = f"{VERDICT_ICONS[v.verdict]} {v.verdict}" if icons else v.verdict
    if v.confirmed is False:
        label += " (not reproduced)"
    elif v.p_value is not None:
        label += f" (p={v.p_value:.2g})"
    if v.memory_verdict == "regression" and v.verdict != "regression":
        label = f"{'❌ ' if icons else ''}memory regression; time: {label}"
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
        _delta_cell(v),
        "–" if v.mdc is None else f"±{v.mdc:.1%}",
        _memory_cell(v),
        label,
    ]


def _delta_cell(v: CaseVerdict) -> str:
    """Δ mean; in A/B mode the paired ratio's 95 % interval follows it."""
    if v.mean_change is None:
        return "–"
    if v.ratio_low is None or v.ratio_high is None:
        return f"{v.mean_change:+.1%}"
    return f"{v.mean_change:+.1%} [{v.ratio_low - 1:+.1%}, {v.ratio_high - 1:+.1%}]"


def _memory_cell(v: CaseVerdict) -> str:
    if v.memory_change is None:
        return "–"
    flag = " ❌" if v.memory_verdict == "regression" else ""
    return f"{v.memory_change:+.1%}{flag}"


def _table(verdicts: Sequence[CaseVerdict], tablefmt: str, icons: bool) -> str:
    rows = _cells([report_row(v, icons=icons) for v in verdicts], tablefmt)
    return tabulate(rows, headers=REPORT_HEADERS, tablefmt=tablefmt, disable_numparse=True)


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
    if report.mode == "ab":
        lines.append(f"A/B: head against {report.base_ref}, paired rounds in one process")
    else:
        lines += [f"Baseline: {_provenance(k)}" for k in report.kernels]
    return "\n".join(lines)


def delta_chart(report: Report) -> str:
    """A mermaid bar chart of Δ mean per compared case: the shape of a change at a glance."""
    deltas = [(v.id, v.mean_change * 100) for v in report.cases if v.mean_change is not None]
    if not deltas:
        return ""
    versions = ", ".join(
        f"{k.kernel} v{k.baseline_version}" for k in report.kernels if k.baseline_version
    )
    against = f"base {report.base_ref}" if report.mode == "ab" else f"baseline ({versions})"
    return mermaid_delta_chart(
        deltas,
        f"Δ vs {against}",
        threshold=report.thresholds.mean_slowdown * 100,
    )


def terminal_report(report: Report) -> str:
    """Plain-text report for a terminal: table, then notes and footer."""
    lines = [_table(grouped(report.cases), "simple", False), "", report.headline]
    lines += [f"note: {k.kernel}: {k.note}" for k in report.kernels if k.note]
    lines += [f"warning: {w}" for k in report.kernels for w in k.warnings]
    lines.append(footer(report))
    return "\n".join(lines) + "\n"
