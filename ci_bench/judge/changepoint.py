"""Change points in a case's history: where its level moved, by PELT with a stated penalty.

Method (README, "History"): the series is the log of each commit's median time, so a change
is relative (+20 % weighs the same at 1 ms and 1 s). ``ruptures``' PELT (Killick, Fearnhead
& Eckley 2012, exact search) finds the segmentation minimising the within-segment sum of
absolute deviations from each segment's median (the ``l1`` cost: one preempted run cannot
drag a level, as it drags a mean) plus ``3 · σ · ln n`` per change, a BIC-type penalty.
σ is the noise, estimated robustly from first differences (``1.4826 · MAD(Δy) / √2``),
which a few level shifts barely move; a floor of 0.1 % keeps bit-identical series from
turning float dust into changes. ``benchmarks/changepoint_quality.py`` measures the
result: on 30-commit series of pure noise (2 %, Gaussian or with 10 % slow outliers) 0.5 %
show a change; a 10 % step is found at its own commit in 89-96 % of series. Short
histories (8-12 commits, simulated): 2-5 % false changes; a +10 % step found in 82-91 % at
2 % noise, but in 0-3 % (and +25 % in 5-8 %) with the noise measured on a shared 2-core CPU
(about 15-20 % run to run), where a dozen points cannot show a step. No threshold on the size
of a change is involved: the noise decides.

Scale: the search runs on the newest ``WINDOW`` points of a series. PELT on the ``l1``
cost grows faster than quadratically with the series (about 10 s at 1,000 points on a
2-core CPU), and a history may hold 100,000 commits; the window keeps ``history`` and
``site`` linear in the records (``benchmarks/history_scale.py``, docs/SCALE.md). Older
points are drawn, not searched: a level change among them is not reported.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SIGMA_FLOOR = 1e-3  # in log units: 0.1 %
MIN_SIZE = 2  # points per segment: one odd commit is an outlier, not a level
WINDOW = 100  # the newest points searched (see "Scale" above)


@dataclass(frozen=True)
class ChangePoint:
    """The level changed at ``index``: the first point of the new segment."""

    index: int
    before: float  # the median of the segment before, in the series' units
    after: float  # the median of the segment from ``index`` on
    change: float  # after / before - 1

    @property
    def slower(self) -> bool:
        return self.change > 0


def _median(values: Sequence[float]) -> float:
    """The median without overflow or underflow: ``a + (b - a) / 2`` for the middle pair
    (``(a + b) / 2`` is infinite near 1e308, ``a/2 + b/2`` zero at 5e-324)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    low, high = ordered[mid - 1], ordered[mid]
    return low + (high - low) / 2


def noise_sigma(logs: np.ndarray) -> float:
    """Robust noise estimate from first differences (a step moves one difference only)."""
    diffs = np.diff(logs)
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    return max(1.4826 * mad / math.sqrt(2.0), SIGMA_FLOOR)


def penalty(n: int, sigma: float) -> float:
    """Per change, on the sum-of-absolute-deviations cost: 3 σ ln n."""
    return 3.0 * sigma * math.log(n)


def detect(
    values: Sequence[float], *, min_size: int = MIN_SIZE, window: int = WINDOW
) -> list[ChangePoint]:
    """Level changes in a positive series (e.g. median ms per commit, oldest first), among
    its newest ``window`` points; indices are into the whole series."""
    if any(not math.isfinite(v) or v <= 0 for v in values):
        raise ValueError("change-point detection needs finite, positive values")
    offset = max(0, len(values) - window)
    return [
        ChangePoint(cp.index + offset, cp.before, cp.after, cp.change)
        for cp in _detect(values[offset:], min_size)
    ]


def _detect(values: Sequence[float], min_size: int) -> list[ChangePoint]:
    n = len(values)
    if n < 2 * min_size:
        return []
    # ruptures (with scipy.stats) takes about a second to import: only the history
    # commands need it, so every other command starts that much faster.
    import ruptures

    logs = np.log(np.asarray(values, dtype=float))
    algo = ruptures.Pelt(model="l1", min_size=min_size, jump=1).fit(logs.reshape(-1, 1))
    ends = algo.predict(pen=penalty(n, noise_sigma(logs)))
    bounds = [0, *ends]
    segments = [values[a:b] for a, b in itertools.pairwise(bounds)]
    changes = []
    for i in range(1, len(segments)):
        before, after = _median(segments[i - 1]), _median(segments[i])
        # In log space: after / before overflows for levels 1e-300 -> 1e300 (inf, not a size).
        change = math.expm1(min(math.log(after) - math.log(before), 700.0))
        changes.append(ChangePoint(bounds[i], before, after, change))
    return changes
