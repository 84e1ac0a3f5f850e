"""Every default a user can override, in one place (flags, config and the pipeline read them).

A ground-floor module: it imports nothing, so the parser, the config, the request and the
measuring room can all name the same value instead of each spelling its own copy.
"""

from __future__ import annotations

from pathlib import Path

OUT_DIR = Path("ci-bench-out")  # where `ci` writes results, report, comment and summary
DTYPE = "bfloat16"  # the dtype of an ad-hoc --shape case
CASE_TIMEOUT_S = 600.0  # one case's wall-clock limit before its worker is killed
