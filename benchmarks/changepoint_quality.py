"""How often ``ci-bench history`` reports a level change that is not there, and finds one
that is: simulated per-commit medians, seeded.

    python benchmarks/changepoint_quality.py [--series 400] [--commits 30]
    python benchmarks/changepoint_quality.py --noise-from 'noise/run*.json'

Long histories: Gaussian noise (σ = 2 % per commit) and the same with 10 % of commits 5×
noisier (always slower: a preempted runner). Steps of +5 %, +10 % and +25 % at commit 2n/3.

Short histories (8, 10 and 12 commits: what a dashboard shows for weeks after a release):
SIMULATED with this machine's measured noise. ``--noise-from`` reads results files of
repeated ``ci-bench run``s of the same cases (one file per run) and takes every case's
run-to-run deviations of its median (log, about the case's own median); each simulated
commit draws one of them (a bootstrap: the machine's own tails, not a Gaussian's). Steps of
+10 % and +25 % at commit 2n/3.

A step counts as found only at its own commit (and, in a second column, within one commit
of it); any change in a pure-noise series is a false one. Nothing here runs a kernel.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ci_bench.judge.changepoint import detect

Noise = Callable[[random.Random], float]  # one commit's relative deviation


def gaussian(sigma: float, outliers: bool = False) -> Noise:
    def draw(rng: random.Random) -> float:
        noise = rng.gauss(0, sigma)
        if outliers and rng.random() < 0.1:
            noise = abs(noise) * 5  # a slow commit: a preempted or busy runner
        return noise

    return draw


def resampled(deviations: Sequence[float]) -> Noise:
    """Draw a measured relative deviation (a bootstrap of the machine's own noise)."""
    return lambda rng: math.expm1(rng.choice(deviations))


def series(rng: random.Random, n: int, noise: Noise) -> list[float]:
    return [1.0 + noise(rng) for _ in range(n)]


def measured_deviations(pattern: str) -> tuple[list[float], str]:
    """Every case's log-median deviations across the runs matched by ``pattern``."""
    medians: dict[str, list[float]] = {}
    where = Path(pattern)
    paths = sorted(where.parent.glob(where.name))
    for path in paths:
        for case in json.loads(path.read_text(encoding="utf-8"))["cases"]:
            if case.get("status") == "ok":
                key = f"{case['id']} {case.get('mode', 'forward')}"
                medians.setdefault(key, []).append(case["pallas"]["median_ms"])
    deviations: list[float] = []
    for values in medians.values():
        if len(values) >= 3:
            centre = statistics.median(math.log(v) for v in values)
            deviations += [math.log(v) - centre for v in values]
    if not deviations:
        raise SystemExit(f"{pattern}: no case measured in three or more runs")
    sd = statistics.pstdev(deviations)
    mad = 1.4826 * statistics.median(abs(d) for d in deviations)
    worst = max(abs(d) for d in deviations)
    what = (
        f"measured: {len(paths)} runs of {len(medians)} case(s); "
        f"run-to-run deviation of the median: sd {sd:.1%}, robust (1.4826·MAD) {mad:.1%}, "
        f"largest {math.expm1(worst):+.1%}"
    )
    return deviations, what


def rates(
    rng: random.Random, n: int, noise: Noise, steps: Sequence[float], count: int
) -> tuple[int, list[tuple[int, int]]]:
    """False changes in ``count`` noise series; per step, (found at its commit, within one)."""
    at = 2 * n // 3
    false = sum(bool(detect(series(rng, n, noise))) for _ in range(count))
    found = []
    for step in steps:
        exact = near = 0
        for _ in range(count):
            values = series(rng, n, noise)
            values[at:] = [v * (1 + step) for v in values[at:]]
            changes = detect(values)
            exact += any(c.index == at for c in changes)
            near += any(abs(c.index - at) <= 1 for c in changes)
        found.append((exact, near))
    return false, found


def _share(hits: int, count: int) -> str:
    return f"{hits}/{count} ({hits / count:.0%})"


def long_histories(args: argparse.Namespace) -> None:
    n, at = args.commits, 2 * args.commits // 3
    print(f"{args.series} series of {n} commits, noise {args.sigma:.0%}, step at commit {at}")
    print("| noise | false changes | +5 % found | +10 % found | +25 % found | ms/series |")
    print("| --- | --- | --- | --- | --- | --- |")
    for outliers in (False, True):
        rng = random.Random(1234)
        started = time.perf_counter()
        noise = gaussian(args.sigma, outliers)
        false, found = rates(rng, n, noise, (0.05, 0.10, 0.25), args.series)
        per = (time.perf_counter() - started) / (4 * args.series) * 1e3
        name = "Gaussian" if not outliers else "Gaussian + 10 % outliers ×5"
        cells = " | ".join(_share(exact, args.series) for exact, _ in found)
        rate = f"{false}/{args.series} ({false / args.series:.1%})"
        print(f"| {name} | {rate} | {cells} | {per:.2f} |")


def short_table(label: str, what: str, noise: Noise, count: int) -> None:
    print()
    print(f"SIMULATED short histories, {count} series each, {label}")
    print(what)
    print(
        "| commits | step at | false changes | +10 % at its commit | +10 % within one | "
        "+25 % at its commit | +25 % within one |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n in (8, 10, 12):
        rng = random.Random(4321 + n)
        false, ((e10, n10), (e25, n25)) = rates(rng, n, noise, (0.10, 0.25), count)
        cells = " | ".join(_share(h, count) for h in (e10, n10, e25, n25))
        print(f"| {n} | {2 * n // 3} | {_share(false, count)} | {cells} |")


def short_histories(args: argparse.Namespace) -> None:
    """The measured noise (if given), then Gaussian references: a quiet dedicated runner."""
    if args.noise_from:
        deviations, what = measured_deviations(args.noise_from)
        label = "this machine's measured noise (bootstrap)"
        short_table(label, what, resampled(deviations), args.series)
    else:
        print("\n(no --noise-from: the short histories use Gaussian noise only)")
    for sigma in (args.sigma, 0.05):
        what = f"Gaussian noise, σ = {sigma:.0%} per commit (not measured here)"
        short_table(f"Gaussian {sigma:.0%}", what, gaussian(sigma), args.series)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=400)
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--sigma", type=float, default=0.02)
    parser.add_argument(
        "--noise-from",
        metavar="GLOB",
        help="results files of repeated runs of the same cases: the short histories' noise",
    )
    args = parser.parse_args()
    long_histories(args)
    short_histories(args)


if __name__ == "__main__":
    main()
