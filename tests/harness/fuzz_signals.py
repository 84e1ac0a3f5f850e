"""The cancelled CI job, as a fuzz oracle (``benchmarks/fuzz.py --signal-share``): a run
sent SIGTERM or SIGINT at a random moment (importing jax, reading, measuring, writing) ends
with 143 or 130, soon and without a traceback, leaves valid files or none, and no worker
behind it (issue 54: a swallowed signal read as the run's own verdict)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import time
from pathlib import Path

from tests.harness.fuzz_oracles import judge_files
from tests.harness.fuzz_record import Input
from tests.harness.fuzzing import Failure, Outcome, Workspace

MARK = "CI_BENCH_FUZZ_MARK"
# Where the run notes the moment its main() returned: a signal sent after it (the process
# printing its result, exiting, torn down by the kernel) may find it gone, and the run's own
# exit is then the right one: such a run is judged as unsignalled.
RETURNED = "CI_BENCH_FUZZ_RETURNED"
SIGNAL_GRACE = 30.0  # seconds a signalled run may take to end (the pool's stop grace is 10)


def left_running(mark: str, wait: float = 2.0) -> list[int]:
    """Processes still alive with this run's mark in their environment (its workers)."""
    needle = f"{MARK}={mark}".encode()
    deadline = time.monotonic() + wait
    while True:
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if needle in (entry / "environ").read_bytes().split(b"\0"):
                        found.append(int(entry.name))
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def judge_signalled(
    inp: Input,
    outcome: Outcome,
    ws: Workspace,
    parser: argparse.ArgumentParser,
    sent: int,
    mark: str,
) -> list[Failure]:
    """A run sent SIGTERM or SIGINT while it ran (a cancelled job): it ends with 128 + the
    signal, soon, without a traceback; what it wrote is valid; none of its workers is left.
    Any other exit is the signal swallowed (the run went on to its own verdict)."""
    cmd, name = inp.command, signal.Signals(sent).name
    expected = 128 + sent
    found: list[Failure] = []
    if outcome.hung:
        found.append(Failure("hang", f"{cmd}: still running {SIGNAL_GRACE:g} s after {name}"))
    elif outcome.signal == sent:
        pass  # its default action, before ci-bench set its handler: a shell reads 128 + n
    elif outcome.signal is not None:
        died = signal.Signals(outcome.signal).name
        found.append(Failure("crash", f"{cmd}: {name} ended it by {died}", outcome.err[-2000:]))
    elif outcome.code != expected:
        found.append(
            Failure(
                "fault-unreported",
                f"{cmd}: {name} while it ran ended with exit {outcome.code}, not {expected}",
                outcome.err[-2000:],
            )
        )
    if "Traceback (most recent" in outcome.err:
        found.append(Failure("crash", f"{cmd}: a traceback after {name}", outcome.err[-2000:]))
    left = left_running(mark)
    if left:
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        found.append(Failure("fault-unreported", f"{cmd}: a worker outlived it after {name}"))
    if not outcome.hung:
        found += judge_files(inp, outcome, ws, parser)
    return found


def returned(env: dict[str, str] | os._Environ[str]) -> None:
    """In the run: main() has returned (time.monotonic(), one clock for every process)."""
    if where := env.get(RETURNED):
        with contextlib.suppress(OSError):
            Path(where).write_text(f"{time.monotonic():.6f}")


def returned_before(path: Path, sent_at: float) -> bool:
    """The run's main() had returned before its signal was sent."""
    try:
        return float(path.read_text()) <= sent_at
    except (OSError, ValueError):
        return False
