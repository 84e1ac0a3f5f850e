"""The cost model against the DMA microbenchmarks it took its copy costs from (revision 7).

``tpu_microbench_dma.py`` timed, on a TPU v5e, loops whose iterations wait on p copies
started one iteration ahead, with and without dependent work after the wait; revision 7
charges each wait 9.4 ns and an iteration that waits at least a 0.16 µs round trip unless
its work hides it (ci_bench/measure/model/chips.py). This re-models every one of those
kernels (``loop_call``) on any host and prints measured against modelled time: where the
two constants reproduce their own benchmark and where they do not (it fits nothing).

    .venv/bin/python benchmarks/model_dma_check.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from model_validation_kernels import ADHOC, adhoc  # noqa: E402
from tpu_microbench_dma import loop_call  # noqa: E402

from ci_bench.measure.model import analyze_case  # noqa: E402

DATA = HERE / "data" / "tpu_v5e_microbench_dma_2026-12-06.json"


def main() -> int:
    rows = [r for r in json.loads(DATA.read_text())["rows"] if "iterations" in r]
    columns = ["benchmark", "iterations", "copies", "KiB each", "dependent FMAs"]
    columns += ["measured µs", "modelled µs", "model/measured"]
    print("| " + " | ".join(columns) + " |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        n, p, work = r["iterations"], r["copies"], r.get("work", 0)
        copy_bytes = r.get("copy_bytes", 16 * 512)  # the overlap benchmark's 8 KiB chunks
        fn, args = loop_call(n, p, copy_bytes // 512, work)
        model = analyze_case(adhoc(fn, lambda c, k, a=args: a), ADHOC, ["v5e"])
        us = model.chips["v5e"].modelled_us
        print(
            f"| {r['bench']} | {n} | {p} | {copy_bytes // 1024} | {work} | {r['us']:.1f} "
            f"| {us:.1f} | {us / r['us']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
