"""Small pure text helpers shared by every room: one-line messages, comma lists, and the
patterns that kernel names and versions must match (file names derive from them)."""

from __future__ import annotations

import re

# Names end up in file names, case ids and PR comments: a conservative character set and a
# length limit, by contract; the schema's readers check the same patterns. Match with
# ``fullmatch`` (``$`` alone would let a trailing newline through).
SEMVER_PATTERN = r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?$"
NAME_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
PARAM_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,31}$"
NAME_MAX = 64  # also the longest version
SEMVER = re.compile(SEMVER_PATTERN)
NAME = re.compile(NAME_PATTERN)
PARAM = re.compile(PARAM_PATTERN)


def one_line(text: str | BaseException, limit: int | None = None) -> str:
    """A message on one line: an exception as ``Type: first line``, text with whitespace
    collapsed; cut to ``limit`` characters with an ellipsis."""
    if isinstance(text, BaseException):
        lines = str(text).strip().splitlines()
        line = f"{type(text).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    else:
        line = " ".join(text.split())
    if limit is not None and len(line) > limit:
        return line[: limit - 1] + "…"
    return line


def cut_words(text: str, limit: int) -> str:
    """``text`` held to ``limit`` characters, cut after a whole word (``… and more``
    never ends in half a word): at the last space in the limit's last third, else hard."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space >= limit * 2 // 3:
        head = head[:space].rstrip(" ,;:")
    return head + "…"


def split_list(values: object) -> list[str]:
    """``["a,b", " c "]`` or ``"a, b"`` -> ``["a", "b", "c"]``: comma-separated and repeated
    values alike, blanks dropped, order kept."""
    if values is None:
        return []
    items = list(values) if isinstance(values, list | tuple) else [values]
    words = (w for value in items for w in str(value).replace("\n", ",").split(","))
    return [w.strip() for w in words if w.strip()]


def fmt_ms(value: float | None) -> str:
    """Milliseconds with the digits that matter at their size; "–" when not measured (the
    tables' and the progress lines' one format)."""
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.3f}"
    return f"{value:.4f}"


def case_count(n: int) -> str:
    """``1 case``, ``2 cases``: a count as a reader says it."""
    return f"{n} case" if n == 1 else f"{n} cases"


# A plain http(s) link target (``schema.base`` re-exports it; here so the output edge needs
# no pydantic).
HTTP_URL = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%+=@-]*)*")
