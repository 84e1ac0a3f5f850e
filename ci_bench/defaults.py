"""Every default a user can override, in one place (flags, config and the pipeline read them).

A ground-floor module: it imports nothing, so the parser, the config, the request and the
measuring room can all name the same value instead of each spelling its own copy.
"""

from __future__ import annotations

from pathlib import Path

OUT_DIR = Path("ci-bench-out")  # where `ci` writes results, report, comment and summary
DTYPE = "bfloat16"  # the dtype of an ad-hoc --shape case
CASE_TIMEOUT_S = 600.0  # one case's wall-clock limit before its worker is killed
# The measurement's defaults (the config's keys; the flags' help states them).
WARMUP = 5  # untimed calls per implementation before timing
REPEATS = 20  # timed calls per implementation (the specification's)
SEED = 42  # the inputs' PRNG seed
ADAPTIVE_MAX_S = 30.0  # per-case time cap for adaptive sampling
