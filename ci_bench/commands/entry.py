"""The ``ci-bench`` console script: a cancel is never a traceback, from its first line.

``cli.main`` handles SIGTERM and SIGINT once it runs (``commands.signals``); before that the
command line's own modules are imported (a few tenths of a second), where a Ctrl-C was
Python's KeyboardInterrupt traceback and exit 1. Here, before those imports (and after
``cli.main`` hands the signals back), both end the process at once with 130 or 143 and one
line: nothing is being measured or written then.
What runs before this module (the interpreter's start-up, ``site``) is Python's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from types import FrameType

_SAID = {
    signal.SIGINT: b"ci-bench: interrupted\n",
    signal.SIGTERM: b"ci-bench: terminated (SIGTERM)\n",
}


def _outside_main(signum: int, frame: FrameType | None) -> None:
    """Before ``cli.main`` takes the signals over, and after it hands them back (its output
    flushed): the process ends as the signal asks, in one line."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os.write(2, _SAID.get(signum, b""))
    os._exit(128 + signum)


def main() -> int:
    previous = {s: signal.signal(s, _outside_main) for s in _SAID}
    try:
        from ci_bench.commands.cli import main as command_line

        return command_line()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


if __name__ == "__main__":
    sys.exit(main())
