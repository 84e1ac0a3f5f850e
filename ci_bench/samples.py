"""Timing samples summarised: the specification's statistics and the median's precision.

The ground floor shared by the room that measures (``measure.harness``: a case's
``TimingStats``, adaptive sampling's stopping rule) and the room that judges
(``judge.stats`` re-exports these). Pure: no clock, no file; scipy only inside ``median_ci``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import median

from ci_bench.schema import TimingStats


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median from order statistics.

    The number of samples below the true median is Binomial(n, 1/2), so the sorted
    samples at the matching ranks bound it, whatever the timing distribution looks like.
    """
    n = len(samples)
    ordered = sorted(samples)
    if n < 6:
        return ordered[0], ordered[-1]
    from scipy import stats

    tail = (1 - confidence) / 2
    # The lower bound is the sample at 0-based rank lo, the largest with P(B <= lo - 1)...
    # i.e. P(B < lo + 1) <= tail; from the smallest k with P(B <= k) >= tail:
    k = int(stats.binom.ppf(tail, n, 0.5))
    lo = max(k if stats.binom.cdf(k, n, 0.5) <= tail else k - 1, 0)
    return ordered[lo], ordered[n - 1 - lo]


def relative_ci_width(samples: Sequence[float], confidence: float = 0.95) -> float:
    """Width of the median's interval relative to the median: the achieved precision."""
    lo, hi = median_ci(samples, confidence)
    mid = median(samples)
    return (hi - lo) / mid if mid > 0 else math.inf


def stats_of(samples_s: Sequence[float], warmup: int) -> TimingStats:
    """TimingStats from raw seconds, with the specification's population std."""
    mean = sum(samples_s) / len(samples_s)
    return TimingStats(
        mean_ms=mean * 1000,
        min_ms=min(samples_s) * 1000,
        max_ms=max(samples_s) * 1000,
        std_ms=(sum((t - mean) ** 2 for t in samples_s) / len(samples_s)) ** 0.5 * 1000,
        median_ms=median(samples_s) * 1000,
        samples_ms=[t * 1000 for t in samples_s],
        warmup=warmup,
        median_ci_rel_width=_finite_or_none(relative_ci_width(samples_s)),
    )


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None
