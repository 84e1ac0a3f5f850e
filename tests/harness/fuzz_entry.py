"""``ci-bench`` as the console script runs it (``ci_bench.commands.entry``), except that an
exception escaping ``main`` exits 120 (not Python's 1, which ci-bench also uses) so the
fuzzer can tell it apart, and the moment ``main`` returned is noted where
``CI_BENCH_FUZZ_RETURNED`` says (tests/harness/fuzz_signals.py). Nothing else is imported
before ``main``: the console script's start-up window is the one fuzzed."""

from __future__ import annotations

import os
import sys
import time
import traceback

from ci_bench.commands.entry import main


def returned() -> None:
    if where := os.environ.get("CI_BENCH_FUZZ_RETURNED"):
        try:
            with open(where, "w") as note:  # noqa: PTH123 (pathlib: one import more)
                note.write(f"{time.monotonic():.6f}")
        except OSError:
            pass


if __name__ == "__main__":
    try:
        code = main()
    except SystemExit:  # argparse's usage errors and --help
        returned()
        raise
    except BaseException:
        traceback.print_exc()
        returned()
        sys.exit(120)
    returned()
    sys.exit(code)
