"""``ci-bench tune``'s ranking, with ties said as ties (pure; docs/TUNE.md, "Ties").

The model ranks by what it reads: modelled time, then HBM bytes, then grid steps. A knob
that changes only in-body work it does not time (an inner loop over a sub-block, say)
leaves all three identical, and an order among such candidates would be the enumeration's,
not the model's. Candidates whose three figures all agree within ``TIE_RESOLUTION`` share
one rank; when the best group holds two or more distinct programs, the best is that set
(``tied``), with the knobs whose values differ in it (``tie_knobs``): the model cannot tell
them apart, ``--measure`` can. Within a group the default comes first, so a tie that holds
the default never names another config as the model's best.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ci_bench.schema.tune import TIE_RESOLUTION, Candidate


def close(a: float, b: float, resolution: float = TIE_RESOLUTION) -> bool:
    """Whether two figures agree within the model's resolution (relative)."""
    return abs(a - b) <= resolution * max(abs(a), abs(b))


def _figures(c: Candidate, chip: str) -> tuple[float, int, int]:
    on = c.chips[chip]
    return on.modelled_us, on.bytes, c.steps or 0


def tie(a: Candidate, b: Candidate, chip: str) -> bool:
    """Whether the model cannot tell ``a`` and ``b`` apart on ``chip``: modelled time, HBM
    bytes and grid steps all within ``TIE_RESOLUTION``."""
    return all(close(x, y) for x, y in zip(_figures(a, chip), _figures(b, chip), strict=True))


@dataclasses.dataclass(frozen=True)
class Ranking:
    """``rank``'s answer: the candidates with their per-chip ranks, and per chip the best
    index, the tied set at the top (two or more distinct programs) and its differing knobs."""

    candidates: list[Candidate]
    best: dict[str, int]
    tied: dict[str, list[int]]
    tie_knobs: dict[str, list[str]]


def _groups(order: list[int], out: Sequence[Candidate], chip: str) -> list[list[int]]:
    """Consecutive candidates (sorted by the figures) that tie with their group's first;
    within a group, the default first, then the search order."""
    groups: list[list[int]] = []
    for i in order:
        if groups and tie(out[groups[-1][0]], out[i], chip):
            groups[-1].append(i)
        else:
            groups.append([i])
    return [sorted(g, key=lambda i: (not out[i].default, i)) for g in groups]


def _programs(members: Sequence[int], out: Sequence[Candidate]) -> int:
    """Distinct traced programs among ``members`` (``same_as``: an identical program)."""
    return len({i if out[i].same_as is None else out[i].same_as for i in members})


def differing_knobs(configs: Sequence[dict]) -> list[str]:
    """The knobs whose values are not all the same across ``configs``, in config order."""
    names = list(configs[0]) if configs else []
    return [n for n in names if len({repr(c.get(n)) for c in configs}) > 1]


def rank(candidates: Sequence[Candidate], chips: Sequence[str]) -> Ranking:
    """Ranks per chip among the candidates that fit and lower as that chip: modelled time,
    then HBM bytes, then grid steps; candidates that tie within the model's resolution
    share a rank (1, 1, 1, 4, ...)."""
    out = list(candidates)
    best: dict[str, int] = {}
    tied: dict[str, list[int]] = {}
    knobs: dict[str, list[str]] = {}
    for chip in chips:
        eligible = [
            i
            for i, c in enumerate(out)
            if chip in c.chips and c.chips[chip].fits and c.chips[chip].lowers is True
        ]
        eligible.sort(key=lambda i: (*_figures(out[i], chip), i))
        groups = _groups(eligible, out, chip)
        position = 1
        for group in groups:
            for i in group:
                chips_of = dict(out[i].chips)
                chips_of[chip] = chips_of[chip].model_copy(update={"rank": position})
                out[i] = out[i].model_copy(update={"chips": chips_of})
            position += len(group)
        if groups:
            top = groups[0]
            best[chip] = top[0]
            if _programs(top, out) > 1:
                tied[chip] = list(top)
                knobs[chip] = differing_knobs([out[i].config for i in top])
    return Ranking(out, best, tied, knobs)
