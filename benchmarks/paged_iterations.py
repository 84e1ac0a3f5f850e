"""Where jax's paged attention's time goes on the v5e, from the chip's stored times alone.

The model reads paged attention at 0.64-1.11 of the chip (docs/MODEL.md, "Validation"). Its
kernel runs one grid step per (sequence, KV head) and, inside it, a loop of one iteration per
block of pages, each starting the next block's copies (a key and a value page each) and
waiting on its own. So every point's device time is a sum of three counts, known from the
point's shape alone: grid steps, loop iterations and pages copied. A least-squares split of
the eight measured times over them says what each costs, to set beside the microbenchmarks
the model charges (a near-empty grid step 0.199 µs, ``tpu_microbench.py step``; a loop
iteration waiting on p copies 0.16 µs + 9.4 ns a copy, ``tpu_microbench_dma.py loop``).
The split is read, not adopted: the model is calibrated on microbenchmarks only, and these
are the points that judge it.

    python benchmarks/paged_iterations.py [benchmarks/data/tpu_v5e_model_rev10_2026-12-07.json]
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data" / "tpu_v5e_model_rev10_2026-12-07.json"
PAGE = 16  # tokens a page (tpu_model_validation_families.py's _paged)
NAME = re.compile(r"(\d+) seqs x (\d+), heads (\d+)/(\d+), (\d+) pages/block")
MICRO = {"grid step": 0.199, "loop iteration": 0.16, "page (two copies)": 2 * 0.0094}


def counts(name: str) -> tuple[int, int, int]:
    """Grid steps, loop iterations and pages copied of one point, from its name."""
    found = NAME.fullmatch(name)
    if found is None:
        raise SystemExit(f"{name!r}: not a paged attention point's name")
    seqs, length, kv_heads, _, per_block = map(int, found.groups())
    steps = seqs * kv_heads
    iterations = steps * (length // PAGE // per_block)
    return steps, iterations, iterations * per_block


def main() -> int:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DATA
    points = [p for p in json.loads(path.read_text())["points"] if p["family"] == "paged"]
    rows = np.array([counts(p["name"]) for p in points], float)
    measured = np.array([p["measured_us"] for p in points])
    cost, *_ = np.linalg.lstsq(rows, measured, rcond=None)
    print(f"{len(points)} points of {path.name}; µs = a x steps + b x iterations + c x pages")
    for what, value in zip(MICRO, cost, strict=True):
        print(f"  {what}: {value:.4f} µs (microbenchmark: {MICRO[what]:.4f})")
    for p, fit, (steps, iterations, pages) in zip(points, rows @ cost, rows, strict=True):
        us = p["measured_us"]
        print(
            f"  {p['name']}: {steps:.0f} steps, {iterations:.0f} iterations, {pages:.0f} pages; "
            f"{us:.1f} µs ({us / iterations:.3f} an iteration), split / chip {fit / us:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
