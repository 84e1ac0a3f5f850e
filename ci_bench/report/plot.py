"""A roofline PNG of a run (specification 1.1); the mermaid chart is in ``chart``.

matplotlib is an optional extra (``ci-bench[plot]``), imported only inside ``roofline_figure``
so the rest of ci-bench never needs it. The device's peak table is the measuring room's
(``measure.roofline.table_peaks``): callers pass its figures in as values (``table``).
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ci_bench.errors import InputError
from ci_bench.report.chart import short_labels
from ci_bench.report.escape import plot_text
from ci_bench.schema import CaseResult, Results

_DTYPE_COLOUR = {"float32": "tab:blue", "bfloat16": "tab:orange", "float16": "tab:green"}
MAX_LABELS = 6
# A log axis can show what lies well inside the float range: real arithmetic intensities
# and TFLOPS sit between 1e-6 and 1e6; a point at 1e308 would push the axis to infinity.
PLOTTABLE = (1e-30, 1e30)
PEAK_RANGE = (1e-6, 1e9)  # a recorded peak outside it is ignored (the CLI's own bound)
# dtype -> (peak TFLOPS, peak GB/s) from the device's peak table; (None, None) when unknown.
TablePeaks = Mapping[str, tuple[float | None, float | None]]


def _plottable(value: float | None, bounds: tuple[float, float] = PLOTTABLE) -> bool:
    return value is not None and math.isfinite(value) and bounds[0] <= value <= bounds[1]


@dataclass(frozen=True)
class Ceilings:
    """Roofline ceilings: compute peak per dtype (TFLOPS) and HBM bandwidth (GB/s)."""

    tflops: dict[str, float]
    gbps: float | None

    @property
    def known(self) -> bool:
        return bool(self.tflops) or self.gbps is not None


def _ok_points(results: Results) -> dict[str, CaseResult]:
    return {
        c.id: c
        for c in results.cases
        if c.status == "ok"
        and c.metrics is not None
        and _plottable(c.metrics.arithmetic_intensity)
        and _plottable(c.tflops)
    }


def resolve_ceilings(
    results: Results,
    peak_tflops: float | None = None,
    peak_gbps: float | None = None,
    table: TablePeaks | None = None,
) -> Ceilings:
    """Peaks from the arguments, else the results' metrics, else the device's peak table."""
    dtypes = sorted({c.dtype for c in results.cases})
    known = table or {}

    def from_table(dtype: str) -> tuple[float | None, float | None]:
        return known.get(dtype, (None, None))

    recorded: dict[str, float] = {}
    recorded_gbps = None
    for c in results.cases:
        if c.metrics is not None:
            peak = c.metrics.peak_tflops
            if _plottable(peak, PEAK_RANGE) and c.dtype not in recorded:
                recorded[c.dtype] = peak  # type: ignore[assignment]
            if _plottable(c.metrics.peak_gbps, PEAK_RANGE):
                recorded_gbps = recorded_gbps or c.metrics.peak_gbps
    if peak_tflops:
        tflops = dict.fromkeys(dtypes, peak_tflops)
    elif recorded:
        tflops = recorded
    else:
        tflops = {d: t for d in dtypes if (t := from_table(d)[0]) is not None}
    gbps = peak_gbps or recorded_gbps or next((g for d in dtypes if (g := from_table(d)[1])), None)
    return Ceilings(tflops=tflops, gbps=gbps)


def _labelled(current: dict[str, CaseResult], base: dict[str, CaseResult]) -> list[str]:
    """The few cases worth a label: largest change against the baseline, else fastest."""
    if base:
        pairs = [
            (abs(math.log((c.tflops or 1) / (base[i].tflops or 1))), i)
            for i, c in current.items()
            if i in base
        ]
        if pairs:
            return [i for _, i in sorted(pairs, reverse=True)[:MAX_LABELS]]
    return sorted(current, key=lambda i: -(current[i].tflops or 0))[:MAX_LABELS]


def _ai(case: CaseResult) -> float:
    """Arithmetic intensity of a case that ``_ok_points`` kept (so it has one)."""
    return (case.metrics.arithmetic_intensity or 0.0) if case.metrics else 0.0


def roofline_figure(
    results: Results,
    *,
    baseline: Results | None = None,
    peak_tflops: float | None = None,
    peak_gbps: float | None = None,
    title: str | None = None,
    table: TablePeaks | None = None,
) -> Any:
    """Log-log roofline: each ok case at (FLOP/byte, achieved TFLOPS), with the device's roofs.

    Baseline cases are grey crosses joined to the current point of the same id, so a move
    down (slower) is visible at a glance. Without known peaks (CPU) only the points are
    drawn and the title says so. Returns a matplotlib Figure on the Agg canvas.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise InputError("ci-bench plot needs matplotlib: pip install 'ci-bench[plot]'") from None
    current = _ok_points(results)
    if not current:
        raise InputError(
            "nothing to plot: no ok case with an arithmetic intensity and TFLOPS within "
            f"{PLOTTABLE[0]:g}..{PLOTTABLE[1]:g}"
        )
    base = _ok_points(baseline) if baseline is not None else {}
    ceilings = resolve_ceilings(results, peak_tflops, peak_gbps, table)
    device = results.meta.device.device_kind

    fig = Figure(figsize=(9, 6), dpi=120, layout="constrained")
    FigureCanvasAgg(fig)  # Agg, never a GUI backend or pyplot's global state
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs = [_ai(c) for c in [*current.values(), *base.values()]]
    lo, hi = min(xs) / 2, max(xs) * 2
    for peak in ceilings.tflops.values() if ceilings.gbps else ():
        ridge = peak * 1000 / ceilings.gbps  # keep the ridge points on the axis
        lo, hi = min(lo, ridge / 2), max(hi, ridge * 2)
    dtypes = sorted({c.dtype for c in current.values()})
    _draw_roofs(ax, ceilings, dtypes, lo, hi)
    for dtype in dtypes:
        cases = [c for c in current.values() if c.dtype == dtype]
        colour = _DTYPE_COLOUR.get(dtype, "tab:purple")
        ax.scatter(
            [_ai(c) for c in cases],
            [c.tflops for c in cases],
            color=colour,
            marker="o",
            s=36,
            zorder=3,
            label=f"{dtype} (this run)",
        )
    if base:
        ax.scatter(
            [_ai(b) for b in base.values()],
            [b.tflops for b in base.values()],
            color="grey",
            marker="x",
            s=30,
            zorder=2,
            label="baseline",
        )
        for cid in current.keys() & base.keys():
            pair = (base[cid], current[cid])
            ax.plot(
                [_ai(c) for c in pair],
                [c.tflops for c in pair],
                color="grey",
                linewidth=0.6,
                zorder=1,
            )
    labelled = _labelled(current, base)
    for cid, label in zip(labelled, short_labels(labelled), strict=True):
        ax.annotate(
            label,
            (_ai(current[cid]), current[cid].tflops),
            textcoords="offset points",
            xytext=(5, 4),
            fontsize=7,
        )
    ax.set_xlim(lo, hi)
    ax.set_xlabel("Arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("Achieved TFLOPS")
    ax.grid(True, which="both", linewidth=0.3, alpha=0.5)
    heading = title or f"Roofline: {', '.join(sorted(results.meta.kernels))} on {device}"
    if not ceilings.known:
        heading += f" (no peak known for {device})"
    ax.set_title(plot_text(heading), fontsize=10)
    _plain_log_ticks(ax)
    fig.legend(loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    return fig


def roofline_png(results: Results, out: Path, **chart: Any) -> Path:
    """``roofline_figure`` (the same keywords) written to ``out`` as a PNG (atomically,
    replacing ``out``)."""
    from ci_bench.store.files import write_bytes

    write_bytes(out, png_bytes(results, **chart), what="roofline chart", replace=True)
    return out


def png_bytes(results: Results, **chart: Any) -> bytes:
    """The roofline chart (``roofline_figure``'s keywords) as PNG bytes, for the one writer
    to put in place."""
    buffer = io.BytesIO()
    roofline_figure(results, **chart).savefig(buffer, format="png")
    return buffer.getvalue()


def _draw_roofs(ax: Any, ceilings: Ceilings, dtypes: list[str], lo: float, hi: float) -> None:
    """The memory roof (bandwidth·AI) once, up to the highest compute peak; each dtype's flat
    compute peak from its ridge point on, in the dtype's colour."""
    top = max(ceilings.tflops.values(), default=math.inf)
    if ceilings.gbps:
        gbps = ceilings.gbps
        end = min(hi, top * 1000 / gbps)
        ax.plot(
            [lo, end],
            [gbps * lo / 1000, gbps * end / 1000],
            color="black",
            linestyle="--",
            linewidth=1.0,
            label=f"memory roof: {gbps:g} GB/s",
        )
    by_peak: dict[float, list[str]] = {}  # dtypes sharing one peak get one line
    for dtype in dtypes:
        if (peak := ceilings.tflops.get(dtype)) is not None:
            by_peak.setdefault(peak, []).append(dtype)
    for peak, names in by_peak.items():
        start = max(lo, peak * 1000 / ceilings.gbps) if ceilings.gbps else lo
        ax.plot(
            [start, hi],
            [peak, peak],
            color=_DTYPE_COLOUR.get(names[0], "tab:purple") if len(names) == 1 else "black",
            linestyle="--",
            linewidth=1.2,
            label=f"{', '.join(names)} compute roof: {peak:g} TFLOPS",
        )


def _plain_log_ticks(ax: Any) -> None:
    """Log axes labelled 20, 0.04 rather than 2×10¹, 4×10⁻²: easier to read off."""
    from matplotlib.ticker import LogFormatter

    class Plain(LogFormatter):
        def __call__(self, x: float, pos: int | None = None) -> str:
            return f"{x:g}" if super().__call__(x, pos) else ""

    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(Plain(base=10))
        axis.set_minor_formatter(Plain(base=10, labelOnlyBase=False))
