"""THE timer table: how per-call times are taken, one entry per timer.

The results' ``meta.settings.timer``, the config's ``timer``, ``HarnessSettings.timer`` and
the strategies of ``ci_bench.measure.timers`` (one function per entry, registered under the
entry's name and checked against this table when imported) all derive from ``TIMERS``, as
verdict names derive from ``VERDICTS``. Adding a timer is one entry here and its function
there. Results taken by different timers never compare (``incomparable``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Timer:
    name: str
    meaning: str  # one line for the docs


TIMERS: tuple[Timer, ...] = (
    Timer(
        "wallclock",
        "the specification's method: the host clock around each call and its "
        "block_until_ready (Python dispatch included)",
    ),
    Timer(
        "profiler",
        "each call's device time from the XLA executions of a jax.profiler trace; the wall "
        "time of the same calls is kept beside it (dispatch overhead)",
    ),
)
TIMER_NAMES: tuple[str, ...] = tuple(t.name for t in TIMERS)
# The first entry, the specification's method: what a file without a timer (format 1) and a
# run without one in its settings were timed by.
SPECIFICATION_TIMER = TIMER_NAMES[0]
# A pydantic-checked enum of the names above (``Literal`` of the table's names).
TimerName = Literal[TIMER_NAMES]  # type: ignore[valid-type]
