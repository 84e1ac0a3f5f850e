"""Untrusted text made inert: one place that escapes for GitHub markdown and workflow commands.

Case ids come from a pull request's kernel parameters, error texts from its code, device
names and refs from an artifact the commenter renders: none of it may add a table cell, a
heading, HTML, a link, a code block or a notification. Pure functions, no I/O.
"""

from __future__ import annotations

import re

from ci_bench.text import HTTP_URL, cut_words, one_line

# Zero-width joiner: ``@user`` and ``#123`` stay readable but no longer notify or link.
ZWJ = "\u200d"
# Only what can change structure: code spans, cell splits, links and images, escapes.
_MARKDOWN = re.compile(r"([\\`|\[\]])")
_MENTION = re.compile(r"([@#])(?=[\w-])")
# GitHub turns bare ``https://…`` and ``www.…`` into links (its autolink extension).
_SCHEME = re.compile(r"(?i)\b(https?|ftp):(?=//)")
_WWW = re.compile(r"(?i)\b(www)\.")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def md_inline(text: str, limit: int = 300) -> str:
    """Text for a markdown table cell, list item or paragraph: literal, on one line.

    HTML is entity-escaped; backslashes, backticks, ``|`` (a cell cannot split) and
    brackets (no links or images) are backslash-escaped; ``@``/``#`` followed by a name get
    a zero-width joiner, and so do bare URLs (``https:``, ``www.``), which GitHub would
    link; newlines become spaces, so no heading or list can start.
    """
    line = cut_words(one_line(text), limit)
    line = "".join(_HTML.get(c, c) for c in line)
    line = _MARKDOWN.sub(r"\\\1", line)
    line = _WWW.sub(rf"\1{ZWJ}.", _SCHEME.sub(rf"\1:{ZWJ}", line))
    return _MENTION.sub(lambda m: m[1] + ZWJ, line)


_PLAIN_ID = re.compile(r"[\w./=+-]{1,512}")


def md_id(text: str) -> str:
    """A case id for a table cell or list item: a code span when it is plain (every id the
    kernel contract produces), else escaped text, so a hostile id cannot break out."""
    return f"`{text}`" if _PLAIN_ID.fullmatch(text) else md_inline(text)


def safe_url(url: str | None) -> str | None:
    """``url`` if it is a plain http(s) URL fit for a link target, else None: the same rule
    a report's ``run_url`` and the dashboard's links follow (``schema.base.HTTP_URL``)."""
    return url if url and len(url) <= 2048 and HTTP_URL.fullmatch(url) else None


# Every character some reader ends a line at (Python's ``str.splitlines``; the runner's own
# reader at CR and LF): inside a line each is shown as its escape, never obeyed.
LINE_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_BREAK_TEXT = {c: f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}" for c in LINE_BREAKS}
_BREAKS = re.compile(f"[{re.escape(LINE_BREAKS)}]")
ZWSP = "\u200b"
# A workflow command: ``::name::`` at the start of a line after any whitespace (v2), or
# ``##[name]`` anywhere in it (v1, still parsed by the runner).
_COMMAND_START = re.compile(r"^(\s*):(?=:)")
_V1_COMMAND = re.compile(r"#(?=#\[)")


def inert_line(line: str) -> str:
    """One line of terminal output that no runner reads as a workflow command.

    ``line`` holds no LF (the caller splits there); every other line break becomes its
    escape text, a leading ``::`` (after whitespace) and any ``##[`` get a zero-width space
    between their characters. Text that was no command comes back unchanged.
    """
    line = _BREAKS.sub(lambda m: _BREAK_TEXT[m[0]], line)
    line = _COMMAND_START.sub(rf"\1:{ZWSP}", line)
    return _V1_COMMAND.sub(f"#{ZWSP}", line)


_COMMAND_LINE = re.compile(r"^\s*::", re.MULTILINE)


def _suspect(text: str) -> bool:
    """Could ``inert_line`` change any line of ``text``? A few scans of the block, so the
    common case (a 30 MB JSON report) costs no regex per line."""
    if "##[" in text or any(c in text for c in LINE_BREAKS):
        return True
    return "::" in text and _COMMAND_LINE.search(text) is not None


def inert_text(text: str) -> str:
    """``inert_line`` applied to each line of ``text`` (LF-separated, LFs kept)."""
    if not _suspect(text):
        return text
    return "\n".join(inert_line(line) for line in text.split("\n"))


def workflow_data(text: str) -> str:
    """The message of a ``::error::`` workflow command (the runner's own escaping).

    ``%``, CR and LF are percent-encoded, as the runner unescapes them; other line breaks
    (U+0085, U+2028, ...) are shown as escapes; a ``::`` or ``##[`` gets a zero-width
    space so it can never read as the start of another command.
    """
    escaped = str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    escaped = _BREAKS.sub(lambda m: _BREAK_TEXT[m[0]], escaped)
    return _V1_COMMAND.sub(f"#{ZWSP}", escaped.replace("::", f":{ZWSP}:"))


def workflow_property(text: str) -> str:
    """A property value (``title=``) of a workflow command: also ``:`` and ``,`` encoded."""
    return workflow_data(text).replace(":", "%3A").replace(",", "%2C")


def plot_text(text: str, limit: int = 200) -> str:
    """Text for a matplotlib title or label: ``$`` would start mathtext and can fail to parse."""
    return one_line(text, limit).replace("$", r"\$")
