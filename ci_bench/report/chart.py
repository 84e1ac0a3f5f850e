"""Text charts for tables (pure): a diverging Δ bar that renders the same everywhere.

A PR comment cannot be checked against GitHub's mermaid renderer here, and its bar charts
drew negative changes as positive bars with overlapping labels. A bar made of characters
inside the table row is read with the number beside it, and a reader can check it:
left of the axis is faster, right is slower, and each full block is one threshold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

_DTYPE_SHORT = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}

BAR_CELLS = 5  # per side: five thresholds (25 % at the specification's 5 %)
_TRACK, _AXIS, _FULL, _OVER = "·", "│", "█", "+"
_HALF_RIGHTWARD, _HALF_LEFTWARD = "▌", "▐"  # half a cell, touching the axis side


def short_labels(ids: Sequence[str]) -> list[str]:
    """Readable case labels: the kernel prefix dropped when all ids share it, dtypes shortened.

    ``matmul/B1-M128-K128-N128/bfloat16`` becomes ``B1-M128-K128-N128/bf16``.
    """
    parts = [i.split("/") for i in ids]
    one_kernel = len({p[0] for p in parts if len(p) == 3}) == 1 and all(len(p) == 3 for p in parts)
    labels = []
    for p in parts:
        if len(p) == 3:
            p = [*p[:2], _DTYPE_SHORT.get(p[2], p[2])]
        labels.append("/".join(p[1:] if one_kernel else p))
    return labels


def _side(cells: float, half: str) -> list[str]:
    """One side's characters from the axis outwards: full cells, a half, then the track."""
    halves = min(round(cells * 2), 2 * BAR_CELLS)
    out = [_FULL] * (halves // 2) + ([half] if halves % 2 else [])
    out += [_TRACK] * (BAR_CELLS - len(out))
    if cells > BAR_CELLS:
        out[-1] = _OVER
    return out


def delta_bar(change: float | None, unit: float) -> str:
    """``change`` (e.g. +0.12 for 12 % slower) as a diverging bar of ``2·BAR_CELLS + 1``
    characters: a full block per ``unit`` (the threshold), halves in between, ``+`` at the
    end when it goes further; faster grows left of ``│``, slower right. "" without a change.
    """
    if change is None or not math.isfinite(change) or unit <= 0:
        return ""
    cells = min(abs(change) / unit, BAR_CELLS + 1)  # 1e308 / 0.05 is inf: capped first
    if change >= 0:
        left, right = [_TRACK] * BAR_CELLS, _side(cells, _HALF_RIGHTWARD)
    else:
        left, right = _side(cells, _HALF_LEFTWARD)[::-1], [_TRACK] * BAR_CELLS
    return "".join(left) + _AXIS + "".join(right)


def bar_legend(unit: float) -> str:
    """What the bar's marks mean, for the line under its table."""
    return (
        f"bar: each █ is {unit:.0%} (the threshold), ▌ half of it, + beyond "
        f"{BAR_CELLS * unit:.0%}; faster left of │, slower right of it"
    )
