"""Exports of a results file for dashboards teams already run (pure conversion).

- ``bmf``: Bencher Metric Format (https://bencher.dev/docs/reference/bencher-metric-format):
  ``{benchmark: {measure: {value, lower_value?, upper_value?}}}``. ``latency`` is in
  nanoseconds, as Bencher's built-in Latency measure; ``throughput`` is calls per second,
  as its built-in Throughput measure (operations / second); ``tflops`` is a custom measure.
- ``gab``: github-action-benchmark's ``customSmallerIsBetter`` input: a list of
  ``{name, unit, value, range?, extra?}`` (its ``BenchmarkResult`` in ``src/extract.ts``).

The value is the median of the Pallas samples (what ci-bench's verdicts are robust on);
the interval is the interquartile range. Error cases have no figures and are left out, and
so is a figure that overflows in the exported unit (``1e308`` ms in nanoseconds): JSON has
no infinity, and neither tool could read one.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Literal

from ci_bench.schema.results import CaseResult, Results

Format = Literal["bmf", "gab"]
FORMATS: tuple[Format, ...] = ("bmf", "gab")


def _quartiles(samples: list[float]) -> tuple[float, float]:
    if len(samples) < 2:
        return samples[0], samples[0]
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return q1, q3


def _ok(results: Results) -> list[CaseResult]:
    return [c for c in results.cases if c.status == "ok" and c.pallas is not None]


def _finite(measure: dict[str, float]) -> bool:
    return all(math.isfinite(v) for v in measure.values())


def to_bmf(results: Results) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for case in _ok(results):
        stats = case.pallas
        assert stats is not None  # _ok
        q1, q3 = _quartiles(stats.samples_ms)
        ns = 1e6  # per ms
        measures = {
            "latency": {
                "value": stats.median_ms * ns,
                "lower_value": q1 * ns,
                "upper_value": q3 * ns,
            }
        }
        if stats.median_ms > 0 and q1 > 0:
            measures["throughput"] = {
                "value": 1e3 / stats.median_ms,
                "lower_value": 1e3 / q3,
                "upper_value": 1e3 / q1,
            }
        if case.tflops is not None:
            measures["tflops"] = {"value": case.tflops}
        kept = {name: m for name, m in measures.items() if _finite(m)}
        if kept:
            out[case.id] = kept
    return out


def to_gab(results: Results) -> list[dict[str, Any]]:
    device = results.meta.device
    out = []
    for case in _ok(results):
        stats = case.pallas
        assert stats is not None  # _ok
        q1, q3 = _quartiles(stats.samples_ms)
        extra = [
            f"mean {stats.mean_ms:.6g} ms, min {stats.min_ms:.6g} ms",
            f"IQR {q1:.6g}-{q3:.6g} ms over {stats.repeats} samples",
            f"{case.kernel} v{case.version} on {device.identity} ({device.software})",
        ]
        if case.tflops is not None:
            extra.append(f"TFLOPS {case.tflops:.6g}")
        if case.metrics and case.metrics.mfu is not None:
            extra.append(f"MFU {case.metrics.mfu:.2%}")
        out.append(
            {
                "name": case.id,
                "unit": "ms",
                "value": stats.median_ms,
                "range": f"± {q3 / 2 - q1 / 2:.6g}",
                "extra": "\n".join(extra),
            }
        )
    return out


def export(results: Results, fmt: Format) -> Any:
    return to_bmf(results) if fmt == "bmf" else to_gab(results)
