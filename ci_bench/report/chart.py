"""A mermaid Δ% chart for PR comments (pure text).

GitHub renders mermaid blocks in markdown, so a PR comment gets a chart without uploading
an image.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

_DTYPE_SHORT = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}
MAX_BARS = 30


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


def _mermaid_text(text: str) -> str:
    """Mermaid strings have no escapes: a double quote would end the string."""
    return " ".join(text.replace('"', "'").split())


def _number(value: float) -> str:
    """Fixed-point: mermaid's number token takes no exponent."""
    text = f"{value:.2f}"
    return "0.00" if text == "-0.00" else text


def mermaid_delta_chart(
    cases: Sequence[tuple[str, float]],
    title: str,
    *,
    limit: int = MAX_BARS,
    threshold: float | None = None,
) -> str:
    """A fenced ```mermaid ``xychart-beta`` bar chart of Δ% per case, worst (largest) first.

    ``cases`` are (case id, Δ in percent, e.g. +5.2 for 5.2 % slower). Non-finite deltas are
    dropped; at most ``limit`` bars are drawn. ``threshold`` (percent) adds a flat line, e.g.
    the 5 % slowdown rule. More than six bars lie horizontally so long labels stay readable.
    Returns "" when there is nothing to chart.
    """
    finite = sorted(
        ((cid, d) for cid, d in cases if math.isfinite(d)), key=lambda item: (-item[1], item[0])
    )
    if not finite:
        return ""
    shown = finite[:limit]
    if len(shown) < len(finite):
        title = f"{title} (worst {len(shown)} of {len(finite)})"
    labels = short_labels([cid for cid, _ in shown])
    values = [d for _, d in shown]
    marks = [*values, 0.0, *([threshold] if threshold is not None else [])]
    pad = max(1.0, (max(marks) - min(marks)) * 0.1)
    lo, hi = math.floor(min(marks) - pad), math.ceil(max(marks) + pad)
    orientation = " horizontal" if len(shown) > 6 else ""
    axis = ", ".join(f'"{_mermaid_text(label)}"' for label in labels)
    lines = [
        "```mermaid",
        f"xychart-beta{orientation}",
        f'    title "{_mermaid_text(title)}"',
        f"    x-axis [{axis}]",
        f'    y-axis "Δ mean (%)" {lo} --> {hi}',
        f"    bar [{', '.join(_number(v) for v in values)}]",
    ]
    if threshold is not None:
        lines.append(f"    line [{', '.join(_number(threshold) for _ in values)}]")
    lines.append("```")
    return "\n".join(lines) + "\n"
