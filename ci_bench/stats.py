"""Significance on raw samples: is a change real or noise? (pure, scipy underneath)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

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
