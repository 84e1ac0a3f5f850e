"""Statistics on raw samples: is a change real, how precise is a measurement (pure).

scipy supplies the tests and distributions; nothing here reads a clock or a file.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from statistics import median
from typing import Literal

from ci_bench.samples import median_ci as median_ci
from ci_bench.samples import relative_ci_width as relative_ci_width
from ci_bench.samples import stats_of as stats_of

Direction = Literal["greater", "less"]


def mann_whitney_p(
    current: Sequence[float], baseline: Sequence[float], direction: Direction
) -> float:
    """One-sided Mann-Whitney U p-value that ``current`` is stochastically ``direction``.

    Rank-based, so a single outlier (a GC pause, a preempted core) cannot make a
    regression on its own; asv uses the same test for the same reason.
    """
    if len(current) < 2 or len(baseline) < 2:
        return 1.0
    if min(current) == max(current) == min(baseline) == max(baseline):
        return 1.0
    from scipy import stats  # imported on first use: it costs about a second

    result = stats.mannwhitneyu(current, baseline, alternative=direction, method="auto")
    return float(result.pvalue)


def benjamini_hochberg(p_values: Sequence[float], q: float) -> list[bool]:
    """Which hypotheses are rejected at false-discovery rate ``q`` (Benjamini–Hochberg).

    Over a 100-case matrix, testing each case at level q alone gives about q·100 false
    alarms per run of identical code; BH bounds the expected share of false ones instead.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    cutoff = -1
    for rank, i in enumerate(order, start=1):
        if p_values[i] <= q * rank / m:
            cutoff = rank
    rejected = [False] * m
    for rank, i in enumerate(order, start=1):
        rejected[i] = rank <= cutoff
    return rejected


def robust_sd(samples: Sequence[float]) -> float:
    """Standard deviation estimated from the median absolute deviation (outlier-proof)."""
    mid = median(samples)
    return 1.4826 * median(abs(x - mid) for x in samples)


def minimum_detectable_change(
    current: Sequence[float], baseline: Sequence[float], alpha: float, power: float = 0.8
) -> float | None:
    """Smallest relative change of the median this comparison would detect with ``power``.

    Normal approximation with robust spreads: MDC = (z₁₋α + z_power)·√(s₁²/n₁ + s₂²/n₂)/m.
    A ``pass`` rules out changes larger than this, and nothing smaller.
    """
    if len(current) < 2 or len(baseline) < 2:
        return None
    base = median(baseline)
    if base <= 0:
        return None
    se = math.sqrt(
        robust_sd(current) ** 2 / len(current) + robust_sd(baseline) ** 2 / len(baseline)
    )
    return _z(alpha, power) * se / base


def paired_minimum_detectable_change(
    ratios: Sequence[float], alpha: float, power: float = 0.8
) -> float | None:
    """The same for paired head/base ratios (one sample of log-ratios), as a relative change."""
    logs = [math.log(r) for r in ratios if r > 0]
    if len(logs) < 3:
        return None
    return math.expm1(_z(alpha, power) * robust_sd(logs) / math.sqrt(len(logs)))


def _z(alpha: float, power: float) -> float:
    """z₁₋α + z_power, inflated for rank tests, which lose ~5 % efficiency against the
    t test on normal data (asymptotic relative efficiency 3/π)."""
    from scipy import stats

    return float((stats.norm.ppf(1 - alpha) + stats.norm.ppf(power)) / math.sqrt(3 / math.pi))


def bootstrap_ratio_ci(
    head: Sequence[float],
    base: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Median of paired ratios head/base and its percentile-bootstrap interval.

    Pairs come from the same round, so drift within a run cancels in each ratio.
    """
    if len(head) != len(base) or not head:
        raise ValueError("paired samples need equal, non-zero lengths")
    ratios = [h / b for h, b in zip(head, base, strict=True) if b > 0]
    point = median(ratios)
    rng = random.Random(seed)
    n = len(ratios)
    boots = sorted(median(rng.choices(ratios, k=n)) for _ in range(resamples))
    alpha = (1 - confidence) / 2
    lo = boots[math.floor(alpha * (resamples - 1))]
    hi = boots[math.ceil((1 - alpha) * (resamples - 1))]
    return point, lo, hi


def min_p_mann_whitney(n1: int, n2: int) -> float:
    """The smallest one-sided Mann-Whitney p-value two samples of these sizes can reach
    (complete separation, exact distribution): 1 / C(n1 + n2, n1)."""
    return 1.0 / math.comb(n1 + n2, n1) if n1 and n2 else 1.0


def repeats_needed(min_p: Callable[[int], float], level: float, cap: int = 100_000) -> int:
    """The fewest repeats n for which ``min_p(n) <= level``: below it nothing can ever be
    significant, whatever the change (asv and pyperf meet the same floor)."""
    n = 1
    while min_p(n) > level and n < cap:
        n += 1
    return n
