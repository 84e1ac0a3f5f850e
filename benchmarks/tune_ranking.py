"""Does ``ci-bench tune`` rank jax's published v5e matmul tilings in the published order?

jax's Pallas TPU matmul guide (docs/pallas/tpu/matmul.ipynb, "Performance of pipelined
kernels", https://docs.jax.dev/en/latest/pallas/tpu/matmul.html) times its bf16 kernel on a
TPU v5e with two tilings (bm, bk, bn):

    size   (128, 128, 128)   (512, 1024, 1024)
    4096³  11.772 ms         0.889 ms
    8192³  91.836 ms         6.099 ms

so (512, 1024, 1024) is faster at both sizes. This script runs ``ci-bench tune`` on the
project's matmul (the same grid and BlockSpecs) at 4096³ and 8192³, bf16, chip v5e, over
block sizes 128..2048 in each of bm, bk, bn, prints the full ranking and the search's time,
and says where the published tilings land. Then one search of 1,000 candidates of one case
(bm, bk, bn each in ten multiples of 128) for the time a big search takes on this CPU.

    python benchmarks/tune_ranking.py            # about 2 minutes on a 2-core CPU
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = {  # (bm, bk, bn) -> published v5e ms
    4096: {(128, 128, 128): 11.772, (512, 1024, 1024): 0.889},
    8192: {(128, 128, 128): 91.836, (512, 1024, 1024): 6.099},
}
SIZES = "128,256,512,1024,2048"
TEN = "128,256,384,512,640,768,896,1024,1536,2048"


def _cpu_seconds() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def tune(size: int, values: str) -> tuple[dict, float, float]:
    args = [sys.executable, "-m", "ci_bench.commands.cli", "tune", "--kernel", "matmul"]
    args += ["--shape", f"{size},{size},{size}", "--dtype", "bfloat16", "--chip", "v5e"]
    args += [f"--values=block_{n}={values}" for n in "mkn"]
    args += ["--format", "json", "-q"]
    start, cpu = time.perf_counter(), _cpu_seconds()
    done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, check=False)
    elapsed, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout)["cases"][0], elapsed, cpu


def ranking(case: dict) -> list[tuple[int, tuple[int, ...], dict]]:
    rows = []
    for c in case["candidates"]:
        on = c["chips"].get("v5e")
        if on and on["rank"]:
            rows.append((on["rank"], tuple(c["config"].values()), c))
    return sorted(rows)


def main() -> None:
    for size, published in PUBLISHED.items():
        case, elapsed, cpu = tune(size, SIZES)
        rows = ranking(case)
        print(
            f"\n== matmul {size}³ bf16 on v5e: {case['space']} candidates, "
            f"search {case['seconds']:.1f} s ({elapsed:.1f} s with start-up, {cpu:.1f} s of CPU) =="
        )
        print(
            f"{'rank':>4}  {'(bm, bk, bn)':<20} {'modelled ms':>11}  {'bound':<8} "
            f"{'steps':>7} {'VMEM MiB':>8}  published ms"
        )
        for rank, config, c in rows:
            on = c["chips"]["v5e"]
            mark = published.get(config)
            print(
                f"{rank:>4}  {config!s:<20} {on['modelled_us'] / 1000:>11.3f}  "
                f"{on['bound']:<8} {c['steps']:>7} {c['vmem_bytes'] / 2**20:>8.2f}  "
                f"{'' if mark is None else f'{mark:.3f}'}"
            )
        unfit = [c for c in case["candidates"] if not c["chips"]["v5e"]["fits"]]
        print(f"{len(unfit)} candidates do not fit v5e's 16 MiB scoped VMEM")
        ranks = {config: rank for rank, config, _ in rows}
        order_model = sorted(published, key=lambda cfg: ranks[cfg])
        order_published = sorted(published, key=lambda cfg: published[cfg])
        verdict = "the published order" if order_model == order_published else "NOT the order"
        shown = ", ".join(f"{cfg} rank {ranks[cfg]}" for cfg in order_model)
        print(f"published tilings: {shown}: {verdict}")

    case, elapsed, cpu = tune(4096, TEN)
    modelled = sum(c["why_not"] is None for c in case["candidates"])
    lowered = sum(c["lowers"] is not None for c in case["candidates"])
    print(
        f"\n1,000-candidate search of matmul/B1-M4096-K4096-N4096/bfloat16 on v5e: "
        f"{case['space']} candidates ({modelled} traced and modelled, {lowered} lowered), "
        f"{case['seconds']:.1f} s ({elapsed:.1f} s with start-up, {cpu:.1f} s of CPU time)"
    )
    best = ranking(case)[0]
    print(f"best {best[1]}: {best[2]['chips']['v5e']['modelled_us'] / 1000:.3f} ms modelled")


if __name__ == "__main__":
    main()
