"""The device check's figures, from the files ``benchmarks/gpu_device_check.sh`` wrote.

Per case of the smoke profile: the device time (the profiler timer's trace), the wall clock
of the same calls and of a wallclock run, the CUPTI time where jax's Mosaic GPU profiler
measured it, the cost model's time and physical floor (tensor cores) on the GPU, and the
correctness check. Then, over the cases the model times (status ok): modelled/measured,
median, IQR, share within ±25 % and ×2, and Spearman's rank correlation, per kernel.

Usage: python benchmarks/gpu_device_report.py DIR [--chip h200]
(DIR holds wall.json, device.json, analysis.json and, optionally, cupti.json; any run of
ci-bench makes the first three, so this also reads a CPU run's files.)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from statistics import median
from typing import Any


def _load(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def _cases(doc: Any) -> dict[str, Any]:
    return {c["id"]: c for c in (doc or {}).get("cases", [])}


def _ms(case: Any, key: str = "pallas") -> float | None:
    timing = (case or {}).get(key) or {}
    return timing.get("median_ms")


def _fmt(value: float | None, unit: str = "") -> str:
    return "–" if value is None else f"{value:,.1f}{unit}"


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation (average ranks for ties); None under 3 points."""
    if len(xs) < 3:
        return None

    def ranks(values: list[float]) -> list[float]:
        order = sorted(range(len(values)), key=values.__getitem__)
        out = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2
            i = j + 1
        return out

    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    var = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return cov / var if var else None


def accuracy(ratios: list[float], modelled: list[float], measured: list[float]) -> str:
    """One line: points, median modelled/measured, IQR, within ±25 % and ×2, Spearman."""
    if not ratios:
        return "0 points"
    within = sum(0.75 <= r <= 1.25 for r in ratios) / len(ratios)
    twice = sum(0.5 <= r <= 2 for r in ratios) / len(ratios)
    rho = spearman(modelled, measured)
    return (
        f"{len(ratios)} points, median {median(ratios):.2f}, IQR "
        f"{_quantile(ratios, 0.25):.2f}-{_quantile(ratios, 0.75):.2f}, within ±25 % "
        f"{within:.0%}, within ×2 {twice:.0%}, Spearman "
        f"{'–' if rho is None else f'{rho:.2f}'}"
    )


def report(folder: Path, chip: str) -> str:
    wall, device = _cases(_load(folder / "wall.json")), _cases(_load(folder / "device.json"))
    analysis = _cases(_load(folder / "analysis.json"))
    cupti = (_load(folder / "cupti.json") or {}).get("cases", {})
    lines = [
        f"{'case':<44} {'device µs':>10} {'wall(same) µs':>13} {'wallclock µs':>12} "
        f"{'CUPTI µs':>9} {'model µs':>9} {'floor µs':>9} {'meas/floor':>10}  correct"
    ]
    per_kernel: dict[str, tuple[list[float], list[float], list[float]]] = {}
    under_floor = 0
    for case_id in sorted(set(device) | set(wall)):
        timed = device.get(case_id) or wall.get(case_id)
        dev_ms = _ms(device.get(case_id))
        same_wall = ((device.get(case_id) or {}).get("dispatch") or {}).get("pallas") or {}
        model = analysis.get(case_id) or {}
        on_chip = (model.get("chips") or {}).get(chip) or {}
        modelled = on_chip.get("modelled_us") if model.get("status") == "ok" else None
        floor = on_chip.get("compute_us")
        measured_us = dev_ms * 1000 if dev_ms is not None else None
        if measured_us is None and _ms(wall.get(case_id)) is not None:
            measured_us = _ms(wall.get(case_id)) * 1000  # type: ignore[operator]
        checks = [timed.get("correctness"), *(timed.get("gradients") or {}).values()]
        known = [c["ok"] for c in checks if c]
        correct = all(known) if known else None
        lines.append(
            f"{case_id:<44} {_fmt(measured_us if dev_ms is not None else None):>10} "
            f"{_fmt((same_wall.get('wall_median_ms') or 0) * 1000 or None):>13} "
            f"{_fmt((_ms(wall.get(case_id)) or 0) * 1000 or None):>12} "
            f"{_fmt(cupti.get(case_id)):>9} {_fmt(modelled):>9} {_fmt(floor):>9} "
            f"{_fmt(measured_us / floor if measured_us and floor else None, 'x'):>10}  "
            f"{'yes' if correct else 'NO' if correct is False else timed.get('status')}"
        )
        if measured_us is not None and floor and measured_us < floor:
            under_floor += 1
        if modelled and measured_us:
            bucket = per_kernel.setdefault(timed["kernel"], ([], [], []))
            bucket[0].append(modelled / measured_us)
            bucket[1].append(modelled)
            bucket[2].append(measured_us)
    lines.append("")
    lines.append(f"modelled / measured on {chip} (cases the model times; measured: device time):")
    for kernel, (ratios, modelled, measured) in sorted(per_kernel.items()):
        lines.append(f"  {kernel}: {accuracy(ratios, modelled, measured)}")
    if not per_kernel:
        lines.append("  0 points")
    lines.append(f"cases measured under the tensor-core floor on {chip}: {under_floor}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--chip", default="h200")
    args = parser.parse_args(argv)
    if not (args.folder / "wall.json").exists() and not (args.folder / "device.json").exists():
        print(f"{args.folder}: no wall.json or device.json: nothing to report", file=sys.stderr)
        return 2
    sys.stdout.write(report(args.folder, args.chip))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
