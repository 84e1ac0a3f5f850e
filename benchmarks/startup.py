"""How long ``ci-bench`` takes to start: ``--version``, ``--help`` and one real light command
(``schema``: it loads pydantic's models, no jax), each run several times, the median printed.

    python benchmarks/startup.py                                   # this checkout's ci-bench
    python benchmarks/startup.py --exe before=/path/to/old/.venv/bin/ci-bench --exe after=...

Each ``--exe LABEL=PATH`` is one installed ``ci-bench`` (e.g. the main branch's worktree
before a change, this one after); without any, the ``ci-bench`` beside this interpreter.
A loaded machine makes every figure larger: compare figures taken together, never across
sessions. tests/test_cli_startup.py checks what ``--version`` imports; no test asserts a time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS: tuple[tuple[str, ...], ...] = (("--version",), ("--help",), ("schema",))


def seconds(exe: str, argv: tuple[str, ...]) -> float:
    """Wall time of one start, to exit, output discarded."""
    start = time.perf_counter()
    subprocess.run([exe, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exe", action="append", default=[], metavar="LABEL=PATH")
    parser.add_argument("--runs", type=int, default=7, help="starts per command (default 7)")
    args = parser.parse_args()
    exes = [tuple(e.split("=", 1)) for e in args.exe] or [
        ("this", str(Path(sys.executable).with_name("ci-bench")))
    ]
    print(f"median of {args.runs} starts (s), after one unmeasured start (bytecode cached)")
    print(f"{'ci-bench':<14}" + "".join(f"{label:>12}" for label, _ in exes))
    for argv in COMMANDS:
        cells = []
        for _, exe in exes:
            seconds(exe, argv)  # the first start writes .pyc files: not what a user waits for
            cells.append(statistics.median(seconds(exe, argv) for _ in range(args.runs)))
        print(f"{' '.join(argv):<14}" + "".join(f"{c:>12.3f}" for c in cells))


if __name__ == "__main__":
    main()
