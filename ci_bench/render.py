"""Pure rendering of results: terminal / markdown tables via tabulate, no I/O."""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate

from ci_bench.schema import CaseResult, Results


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


RUN_HEADERS = (
    "case",
    "status",
    "Pallas ms",
    "± std",
    "native ms",
    "speedup",
    "TFLOPS",
    "MFU",
    "AI",
    "bound",
    "compile ms",
)


def run_row(case: CaseResult) -> list[str]:
    metrics = case.metrics
    status = case.status if case.status == "ok" else f"error: {case.error}"
    return [
        case.id,
        status,
        fmt_ms(case.pallas.mean_ms if case.pallas else None),
        fmt_ms(case.pallas.std_ms if case.pallas else None),
        fmt_ms(case.native.mean_ms if case.native else None),
        fmt_ratio(case.speedup),
        fmt_float(case.tflops, 4),
        fmt_pct(metrics.mfu if metrics else None),
        fmt_float(metrics.arithmetic_intensity if metrics else None, 1),
        (metrics.bound or "–") if metrics else "–",
        fmt_ms(case.compile.pallas_ms),
    ]


def results_table(cases: Sequence[CaseResult], tablefmt: str = "simple") -> str:
    """One row per case, errors included with their message."""
    return tabulate(
        [run_row(c) for c in cases],
        headers=RUN_HEADERS,
        tablefmt=tablefmt,
        disable_numparse=True,
    )


def run_summary(results: Results) -> str:
    """One line: what ran where."""
    ok = sum(c.status == "ok" for c in results.cases)
    device = results.meta.device
    return (
        f"{ok}/{len(results.cases)} cases ok on {device.platform} ({device.device_kind}), "
        f"{device.software}, profile {results.meta.profile or 'ad-hoc'}, "
        f"warmup {results.meta.settings.warmup}, repeats {results.meta.settings.repeats}"
    )
