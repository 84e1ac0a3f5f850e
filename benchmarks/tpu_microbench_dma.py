"""What a DMA costs a Pallas TPU kernel beyond its bytes: chip microbenchmarks (issue 51).

jax's paged attention measured 0.31-0.70 of the model's v5e time, worse with fewer pages per
block for the same bytes: its body loops over page blocks, each iteration starting the next
block's page copies and waiting on its own. These benchmarks time that pattern and the
grid's, each alone, never on the kernels that judge the model:

  blocks  a grid of n steps, each copying j small (8, 128) f32 input blocks and one output
          block (j = 1, 2, 4, 8): the per-step cost and how it grows with the blocks a step
          fetches (the pipeline's DMA issue and wait per block);
  loop    one kernel whose body runs a fori_loop of n iterations, each starting p copies of
          one r-row f32 chunk (r x 128 x 4 bytes) into the other half of a double buffer
          and waiting on its own p (p = 0 ... 32; r = 8, 16, 128): the per-iteration cost,
          the per-copy cost, and where the bytes take over.
  gather  the loop's copies with their source read from a table in SMEM (scalar prefetch),
          as jax's paged attention reads its page table, beside the same kernel computing
          the source from the iteration (p = 1 ... 16 copies of 4 KiB): what a copy whose
          address the scalar core loads costs beyond one whose address it computes.

The HBM benchmarks (``hbm-streams``, ``hbm-blocks``, ``hbm-xla``, ``hbm-shapes``: the rate by
the streams a pipeline keeps in flight and by their blocks' shapes) are in
``tpu_microbench_hbm.py`` and run from here, as is ``mxu-chain`` (``tpu_microbench_latency.py``:
what a chain of small dependent MXU products costs a loop iteration).

Run from the repository's root on a TPU host; device time from the profiler, as
tpu_microbench.py (whose provenance and table it uses):

    python benchmarks/tpu_microbench_dma.py --out "$OUT"
    python benchmarks/tpu_microbench_dma.py --out "$OUT" --only hbm-streams,hbm-blocks,hbm-xla
    python benchmarks/tpu_microbench_dma.py --out "$OUT" --only hbm-shapes,mxu-chain
    python benchmarks/tpu_microbench_dma.py --out /tmp/dma --quick   # plumbing, on a CPU

Writes ``microbench_dma.json`` (after each benchmark) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import tpu_microbench_hbm  # noqa: E402
import tpu_microbench_latency  # noqa: E402
from tpu_microbench import device_us, one_line, provenance, table  # noqa: E402

INTERPRET = False


def _slope(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares slope and intercept of time against a count."""
    mean_n = sum(n for n, _ in points) / len(points)
    mean_t = sum(t for _, t in points) / len(points)
    slope = sum((n - mean_n) * (t - mean_t) for n, t in points) / sum(
        (n - mean_n) ** 2 for n, _ in points
    )
    return slope, mean_t - slope * mean_n


def bench_blocks(quick: bool, repeats: int) -> list[dict[str, Any]]:
    counts = (4, 16) if quick else (256, 1024, 4096)
    rows = []
    for j in (1, 2) if quick else (1, 2, 4, 8):
        points = []
        for n in counts:
            xs = [jnp.full((8 * n, 128), float(i), jnp.float32) for i in range(j)]

            def body(*refs, j=j):
                o_ref = refs[j]
                total = refs[0][...]
                for ref in refs[1:j]:
                    total = total + ref[...]
                o_ref[...] = total

            call = pl.pallas_call(
                body,
                grid=(n,),
                in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0)) for _ in range(j)],
                out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                out_shape=jax.ShapeDtypeStruct((8 * n, 128), jnp.float32),
                interpret=INTERPRET,
            )
            us = device_us(call, tuple(xs), repeats)
            points.append((n, us))
            rows.append({"bench": "blocks", "case": f"{j} in + 1 out, {n} steps", "us": us})
        slope, intercept = _slope(points)
        rows.append({"bench": "blocks", "case": f"{j} in + 1 out: per step", "us": slope})
        rows.append({"bench": "blocks", "case": f"{j} in + 1 out: per call", "us": intercept})
    return rows


def loop_call(n: int, p: int, r: int, work: int = 0) -> tuple[Any, tuple[Any, ...]]:
    """A fori_loop of n iterations, each starting the next iteration's p copies of r x 128
    f32 into the other slot and waiting on its own p (jax's paged attention's pattern), then
    ``work`` dependent multiply-adds on the loaded (8, 128) tile."""
    chunks = max(n * p, 1)
    src = jnp.ones((chunks, r, 128), jnp.float32)

    def body(src_hbm, o_ref, buf, sems):
        def copy(it, slot, c):
            return pltpu.make_async_copy(src_hbm.at[it * p + c], buf.at[slot, c], sems.at[slot, c])

        for c in range(p):
            copy(0, 0, c).start()

        def step(it, acc):
            slot = it % 2
            if p:

                @pl.when(it + 1 < n)
                def _():
                    for c in range(p):
                        copy(it + 1, 1 - slot, c).start()

                for c in range(p):
                    copy(it, slot, c).wait()
                acc = acc + buf[slot, 0, :8, :]
            else:
                acc = acc * 1.0001 + 1.0
            for _ in range(work):
                acc = acc * 1.0001 + 0.5
            return acc

        o_ref[...] = jax.lax.fori_loop(0, n, step, jnp.zeros((8, 128), jnp.float32))

    call = pl.pallas_call(
        body,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((8, 128), lambda: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        scratch_shapes=[
            pltpu.VMEM((2, max(p, 1), r, 128), jnp.float32),
            pltpu.SemaphoreType.DMA((2, max(p, 1))),
        ],
        interpret=INTERPRET,
    )
    return call, (src,)


def gather_call(n: int, p: int, r: int, table: bool) -> tuple[Any, tuple[Any, ...]]:
    """The loop's pattern (p copies of r x 128 f32 an iteration, one iteration ahead) with
    every copy's source chunk a scalar-prefetched table's entry (``table``: read from SMEM,
    a permutation; else the same position computed from the iteration, the table unread)."""
    chunks = n * p
    src = jnp.ones((chunks, r, 128), jnp.float32)
    order = jax.random.permutation(jax.random.PRNGKey(0), chunks).astype(jnp.int32)

    def body(order_ref, src_hbm, o_ref, buf, sems):
        def copy(it, slot, c):
            index = order_ref[it * p + c] if table else it * p + c
            return pltpu.make_async_copy(src_hbm.at[index], buf.at[slot, c], sems.at[slot, c])

        for c in range(p):
            copy(0, 0, c).start()

        def step(it, acc):
            slot = it % 2

            @pl.when(it + 1 < n)
            def _():
                for c in range(p):
                    copy(it + 1, 1 - slot, c).start()

            for c in range(p):
                copy(it, slot, c).wait()
            return acc + buf[slot, 0, :8, :]

        o_ref[...] = jax.lax.fori_loop(0, n, step, jnp.zeros((8, 128), jnp.float32))

    call = pl.pallas_call(
        body,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(1,),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((8, 128), lambda i, order: (0, 0)),
            scratch_shapes=[
                pltpu.VMEM((2, p, r, 128), jnp.float32),
                pltpu.SemaphoreType.DMA((2, p)),
            ],
        ),
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        interpret=INTERPRET,
    )
    return call, (order, src)


def bench_gather(quick: bool, repeats: int) -> list[dict[str, Any]]:
    rows = []
    n = 8 if quick else 512
    for p in (1, 4) if quick else (1, 2, 4, 8, 16):
        for from_table in (False, True):
            call, args = gather_call(n, p, 8, from_table)
            us = device_us(call, args, repeats)
            rows.append(
                {
                    "bench": "gather",
                    "case": f"{n} iterations x {p} copies of 4 KiB, source "
                    + ("from an SMEM table" if from_table else "computed"),
                    "iterations": n,
                    "copies": p,
                    "table": from_table,
                    "us": us,
                    "us_per_iteration": us / n,
                }
            )
    return rows


def bench_loop(quick: bool, repeats: int) -> list[dict[str, Any]]:
    rows = []
    budget = 1 << 16 if quick else 1 << 26  # bytes copied per call at most: 64 MiB
    copies = (0, 1, 4) if quick else (0, 1, 2, 4, 8, 16, 32)
    for r in (8,) if quick else (8, 16, 128):
        for p in copies:
            per_iteration = max(p, 1) * r * 128 * 4
            n = max(4, min(512 if not quick else 8, budget // per_iteration))
            call, args = loop_call(n, p, r)
            us = device_us(call, args, repeats)
            rows.append(
                {
                    "bench": "loop",
                    "case": f"{n} iterations x {p} copies of {r * 512 // 1024} KiB",
                    "iterations": n,
                    "copies": p,
                    "copy_bytes": r * 512,
                    "us": us,
                    "us_per_iteration": us / n,
                    "gb_s": n * p * r * 512 / us / 1e3,
                }
            )
    return rows


def bench_overlap(quick: bool, repeats: int) -> list[dict[str, Any]]:
    """Does a copy's latency hide behind the iteration's work, or add to it? The loop with
    w dependent multiply-adds after its waits, against the same work with no copies."""
    rows = []
    n = 8 if quick else 512
    for w in (0, 4) if quick else (0, 16, 64, 256):
        for p in (0, 1) if quick else (0, 1, 16):
            call, args = loop_call(n, p, 16, w)
            us = device_us(call, args, repeats)
            rows.append(
                {
                    "bench": "overlap",
                    "case": f"{n} iterations x {p} copies of 8 KiB + {w} dependent FMAs",
                    "iterations": n,
                    "copies": p,
                    "work": w,
                    "us": us,
                    "us_per_iteration": us / n,
                }
            )
    return rows


BENCH = {
    "blocks": bench_blocks,
    "loop": bench_loop,
    "overlap": bench_overlap,
    "gather": bench_gather,
    **tpu_microbench_hbm.HBM_BENCH,
    **tpu_microbench_latency.LATENCY_BENCH,
}


def main() -> int:
    global INTERPRET
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", default="blocks,loop,overlap")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, interpret mode")
    args = parser.parse_args()
    INTERPRET = args.quick or jax.default_backend() == "cpu"
    tpu_microbench_hbm.INTERPRET = tpu_microbench_latency.INTERPRET = INTERPRET
    args.out.mkdir(parents=True, exist_ok=True)
    found: dict[str, Any] = {"provenance": provenance(), "interpret": INTERPRET, "rows": []}
    found["provenance"]["script"] = "benchmarks/tpu_microbench_dma.py"
    for name in args.only.split(","):
        began = time.monotonic()
        try:
            found["rows"] += BENCH[name](args.quick, args.repeats)
        except Exception as exc:  # one benchmark's failure is said; the others still run
            error = one_line(exc)
            found["rows"].append({"bench": name, "case": "failed", "error": error})
        found.setdefault("seconds", {})[name] = round(time.monotonic() - began, 1)
        (args.out / "microbench_dma.json").write_text(json.dumps(found, indent=1))
    print(table(found["rows"]))
    for row in found["rows"]:
        if "us_per_iteration" in row:
            print(f"{row['case']}: {row['us_per_iteration']:.3f} µs/iteration")
    return 0


if __name__ == "__main__":
    sys.exit(main())
