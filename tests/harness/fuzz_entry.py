"""``ci-bench`` as the console script runs it, except that an exception escaping ``main``
exits 120 (not Python's 1, which ci-bench also uses) so the fuzzer can tell it apart."""

from __future__ import annotations

import sys
import traceback

from ci_bench.commands.cli import main

if __name__ == "__main__":
    try:
        code = main()
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        sys.exit(120)
    sys.exit(code)
