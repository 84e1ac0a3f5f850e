"""How often ``ci-bench history`` reports a level change that is not there, and finds one
that is: simulated per-commit medians, seeded.

    python benchmarks/changepoint_quality.py [--series 400] [--commits 30]

Noise models: Gaussian (σ = 2 % per commit) and the same with 10 % of commits 5× noisier
(always slower: a preempted runner). Steps of +5 %, +10 % and +25 % at commit 2n/3. A step
counts as found only at its own commit; any change in a pure-noise series is a false one.
"""

from __future__ import annotations

import argparse
import random
import time

from ci_bench.judge.changepoint import detect


def series(rng: random.Random, n: int, sigma: float, outliers: bool) -> list[float]:
    values = []
    for _ in range(n):
        noise = rng.gauss(0, sigma)
        if outliers and rng.random() < 0.1:
            noise = abs(noise) * 5  # a slow commit: a preempted or busy runner
        values.append(1.0 + noise)
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=400)
    parser.add_argument("--commits", type=int, default=30)
    parser.add_argument("--sigma", type=float, default=0.02)
    args = parser.parse_args()
    n, at = args.commits, 2 * args.commits // 3
    print(f"{args.series} series of {n} commits, noise {args.sigma:.0%}, step at commit {at}")
    print("| noise | false changes | +5 % found | +10 % found | +25 % found | ms/series |")
    print("| --- | --- | --- | --- | --- | --- |")
    for outliers in (False, True):
        rng = random.Random(1234)
        started = time.perf_counter()
        false = sum(bool(detect(series(rng, n, args.sigma, outliers))) for _ in range(args.series))
        found = []
        for step in (0.05, 0.10, 0.25):
            hits = 0
            for _ in range(args.series):
                values = series(rng, n, args.sigma, outliers)
                values[at:] = [v * (1 + step) for v in values[at:]]
                hits += any(c.index == at for c in detect(values))
            found.append(hits)
        per = (time.perf_counter() - started) / (4 * args.series) * 1e3
        name = "Gaussian" if not outliers else "Gaussian + 10 % outliers ×5"
        cells = " | ".join(f"{h}/{args.series} ({h / args.series:.0%})" for h in found)
        rate = f"{false}/{args.series} ({false / args.series:.1%})"
        print(f"| {name} | {rate} | {cells} | {per:.2f} |")


if __name__ == "__main__":
    main()
