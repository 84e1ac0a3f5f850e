"""The output edge: every line ci-bench prints in CI passes one escaping rule.

A results file, a history record or a baseline may come from a fork's measuring job; what
ci-bench prints from them (a device name in compare's footer, a tag, an error naming a
field) must never put a line on stdout or stderr that the Actions runner reads as a
workflow command (``::add-mask::``, ``::set-output``, ``##[…]``). Rather than trust every
print site, ``inert_output`` wraps ``sys.stdout`` and ``sys.stderr`` for the whole command:
each line goes through ``report.escape.inert_line``. The one deliberate command output, the
annotations of ``github.outputs``, is written with ``write_command`` and built from escaped
parts there. A person's terminal (a TTY outside Actions) is left as it is: its live
progress line redraws with CR.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from ci_bench.report.escape import inert_line, inert_text

_UNDECIDED = ("", ":")  # a line start that could still become ``::``


class InertStream:
    """A text stream that forwards whole lines made inert; a partial line waits until it
    can no longer turn into a command start (or until the command ends)."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw
        self._pending = ""
        self._started = False  # part of the current line has been written

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            block, _, self._pending = self._pending.rpartition("\n")
            started, self._started = self._started, False
            first, sep, rest = block.partition("\n")
            self.raw.write(self._fix(first, started=started) + sep + inert_text(rest) + "\n")
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for text in lines:  # never the raw stream's own: each piece is made inert
            self.write(text)

    def _fix(self, line: str, *, started: bool = False) -> str:
        # A continued line cannot start a command: only its breaks and ``##[`` matter.
        return inert_line("x" + line)[1:] if started else inert_line(line)

    def flush(self, *, everything: bool = False) -> None:
        text = self._pending
        if not everything:  # keep back what a later write could make a command of
            undecided = not self._started and text.lstrip() in _UNDECIDED
            text = "" if undecided else text.rstrip("#")  # ``#`` + ``#[``: a v1 command
        if text:
            self.raw.write(self._fix(text, started=self._started))
            self._pending = self._pending[len(text) :]
            self._started = True
        self.raw.flush()

    def write_command(self, line: str) -> None:
        """A workflow command ci-bench means to give (escaped where it was built)."""
        self.flush(everything=True)
        if self._started:
            self.raw.write("\n")
            self._started = False
        self.raw.write(line)

    def isatty(self) -> bool:
        return self.raw.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def write_command(out: TextIO, line: str) -> None:
    """Write a deliberate workflow command past an ``InertStream`` (or to a plain stream)."""
    command = getattr(out, "write_command", None)
    (command or out.write)(line)


def _wanted(stream: TextIO) -> bool:
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return not tty or os.environ.get("GITHUB_ACTIONS") == "true"


@contextlib.contextmanager
def inert_output() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` inert for the duration (see the module's text)."""
    saved = sys.stdout, sys.stderr
    wrapped = [InertStream(s) if _wanted(s) else s for s in saved]
    sys.stdout, sys.stderr = wrapped
    try:
        yield
    finally:
        for stream in wrapped:
            if isinstance(stream, InertStream):
                with contextlib.suppress(OSError, ValueError):
                    stream.flush(everything=True)
        sys.stdout, sys.stderr = saved
