"""Verdict rows in reading order (worst first, a case's modes together), the p-value that
names its comparison, and commit ids shortened: what every verdict table shares (pure)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ci_bench.report.render import MODE_LABELS, point_id
from ci_bench.schema import VERDICT_PRECEDENCE, VERDICTS, CaseVerdict

VERDICT_ICONS = {s.name: s.icon for s in VERDICTS}


def ordered(verdicts: Sequence[CaseVerdict]) -> list[CaseVerdict]:
    """Worst first (verdict precedence), then the largest change first."""
    rank = {v: i for i, v in enumerate(VERDICT_PRECEDENCE)}

    def key(v: CaseVerdict) -> tuple[int, float, str]:
        worst = 0 if v.memory_verdict == "regression" else rank[v.verdict]
        return worst, -abs(v.mean_change or 0.0), v.id

    return sorted(verdicts, key=key)


MODE_ORDER = {mode: i for i, mode in enumerate(MODE_LABELS)}


def _mode_of(case_id: str) -> str:
    last = case_id.rsplit("/", 1)[-1]
    return last if last in MODE_ORDER else "forward"


def grouped(verdicts: Sequence[CaseVerdict]) -> list[CaseVerdict]:
    """``ordered``, with each case's modes kept together: a point's forward, backward and
    forward+backward rows in that order, the group placed where its worst row would be."""
    rank = {id(v): i for i, v in enumerate(ordered(verdicts))}
    groups: dict[str, list[CaseVerdict]] = {}
    for v in verdicts:
        groups.setdefault(point_id(v.id, _mode_of(v.id)), []).append(v)
    first = {key: min(rank[id(v)] for v in group) for key, group in groups.items()}
    return [
        v
        for key in sorted(groups, key=first.__getitem__)
        for v in sorted(groups[key], key=lambda v: MODE_ORDER[_mode_of(v.id)])
    ]


def p_source(v: CaseVerdict, mode: str) -> str:
    """Which comparison a verdict's p-value belongs to: the A/B (head against base) or the
    stored baseline. In a PR report the A/B's decides every row it measured but drift."""
    if mode == "ab" or (mode == "pr" and v.ratio is not None and v.verdict != "drift"):
        return "A/B"
    return "baseline"


def fmt_p(p: float) -> str:
    """``p=0.018``; below a thousandth only that (``p<0.001``): nobody reads 2.9e-08."""
    return "p<0.001" if p < 1e-3 else f"p={p:.2g}"


def p_text(v: CaseVerdict, mode: str) -> str:
    """``A/B p=0.018``: a p-value always names its comparison."""
    return "" if v.p_value is None else f"{p_source(v, mode)} {fmt_p(v.p_value)}"


_FULL_SHA = re.compile(r"\b([0-9a-f]{12})[0-9a-f]{28}\b")


def short_shas(text: str) -> str:
    """Full commit ids shortened to 12 characters: a reader recognises them, GitHub links
    them, and a line keeps its width."""
    return _FULL_SHA.sub(r"\1", text)


def short_ref(ref: str | None) -> str | None:
    """A base ref as a reader needs it: ``main (0564abcdef01)``; a ref that is its own
    commit (``0564…(0564…)``) once."""
    if ref is None:
        return None
    text = short_shas(ref)
    m = re.fullmatch(r"(\S+) \((\S+)\)", text)
    if m and (m[1] == m[2] or m[2].startswith(m[1]) or m[1].startswith(m[2])):
        return m[1] if len(m[1]) <= len(m[2]) else m[2]
    return text
