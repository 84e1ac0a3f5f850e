"""The sticky comment's hidden markers: how ci-bench finds its ONE comment per workflow
family and pull request, and recognises an older ci-bench's to take over. Pure strings."""

from __future__ import annotations

import re


def _clean(text: str) -> str:
    return "".join(ch for ch in text if ch not in "<>-\n")


def marker(key: str, number: int) -> str:
    """The hidden first line that makes ONE comment per (workflow, pull request) findable,
    whatever the mode and device (``key`` names the workflow family, e.g. ``benchmark``)."""
    return f"<!-- ci-bench sticky: {_clean(key)}|pr {number} -->"


def legacy_marker(key: str) -> str:
    """What the markers of older ci-bench versions (one per workflow, device and mode)
    start with: such a comment is edited into the new one, never left beside it."""
    return f"<!-- ci-bench sticky: {_clean(key)}|"


_ANY_MARKER = "<!-- ci-bench sticky: "
_CURRENT = re.compile(r"^<!-- ci-bench sticky: [^\n]*\|pr \d+ -->")
SUPERSEDED = "<!-- ci-bench superseded -->"


def is_legacy(body: str) -> bool:
    """A sticky comment of an older ci-bench, whatever workflow name its marker carries
    (today's markers end in ``|pr N``: those belong to their own workflow family)."""
    return body.startswith(_ANY_MARKER) and not _CURRENT.match(body)
