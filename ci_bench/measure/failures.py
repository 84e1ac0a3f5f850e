"""How a failed case is told: one line for tables and PR comments, the traceback for logs."""

from __future__ import annotations

import traceback

from ci_bench.text import one_line

__all__ = ["full_traceback", "one_line", "with_hint"]


def full_traceback(exc: BaseException, limit_chars: int = 20_000) -> str:
    """The whole traceback (kept in the results file and printed to the log, never the
    PR comment); the tail is kept when it is huge, since the raising frame is last."""
    text = "".join(traceback.format_exception(exc)).rstrip()
    return text if len(text) <= limit_chars else "…" + text[-limit_chars:]


TPU_ONLY = "Only interpret mode is supported on CPU backend"


def with_hint(message: str) -> str:
    """Add what to do to the errors whose fix is known."""
    if TPU_ONLY in message:
        return (
            f"{message} (a TPU-only kernel: run it under jax's TPU interpreter with "
            '--cpu-interpret tpu or cpu-interpret = "tpu" in [tool.ci-bench])'
        )
    return message
