"""Every tiling of the project's matmul on a TPU: which compile, and how fast each runs.

Issue 51 asks two things of the cost model that only a full sweep on the chip answers:
does its VMEM fit agree with the compiler on every tiling (no false fit, no false misfit),
and does ``tune``'s pick measure within 5 % of the chip's best tiling. Issue 53 asks which
tiles the backward's two products (``g·Bᵀ``, ``Aᵀ·g``) want. This script measures; the
comparison with the model runs on any machine from the data (``--render``).

On a TPU host, from the repository's root, output under OUT (``sweep.json``, rewritten
after every (product, size, dtype), so a time limit keeps what was done):

    python benchmarks/tpu_matmul_sweep.py --out "$OUT" --deadline 400
    python benchmarks/tpu_matmul_sweep.py --out "$OUT" --sizes 1024 --products nt,tn
    python benchmarks/tpu_matmul_sweep.py --out "$OUT" --sizes 513 --batch 4 --products nn,nt,tn
    python benchmarks/tpu_matmul_sweep.py --out /tmp/sweep --quick   # plumbing, on a CPU

Per (product, size, dtype): every (bm, bk, bn) of 128..2048 that is a distinct program
(``BlockSizes.within`` maps a tile larger than its dimension to the same program as the
dimension's share) is compiled ahead of time (``jit(...).lower(...).compile()``); a refusal
is recorded with the compiler's reason. Every compiled tiling and XLA's ``jnp.matmul`` are
then timed in interleaved rounds in one profiler trace (device time, the project's own
timer: ``ci_bench.measure.timers``): the median of ``--repeats`` rounds. With ``--batch B``
the operands are ``[B, size, size]`` and a program is its blocks and the batch entries one
grid step multiplies (``kernel.batch_block``, decided by the tile): each is swept, and each
blocks' unfolded program (one entry a step) too.

    python benchmarks/tpu_matmul_sweep.py --render benchmarks/data/<sweep>.json

measures nothing: it runs ``ci-bench tune --chip v5e`` (the model alone) for each swept
forward (size, dtype) and prints, per sweep, VMEM fit against the compiler, the model's
pick and ``tune --measure K``'s (the measured best of the model's top K and its ties)
against the chip's best, and Spearman's rank correlation of modelled and measured times.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

SIZES = (128, 256, 512, 1024, 2048)
# The product each name times, as the backward calls it: nn the forward, nt dA = g·Bᵀ, tn dB =
# Aᵀ·g; operands stored as the forward's (a [M,K], b [K,N], g [M,N]).
PRODUCTS = ("nn", "nt", "tn")


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:400] or type(exc).__name__


def operands(
    product: str, size: int, dtype: str, batch: int = 1
) -> tuple[Any, Any, dict[str, bool]]:
    import jax
    import jax.numpy as jnp

    key_a, key_b = jax.random.split(jax.random.PRNGKey(0))
    lead = (batch,) if batch > 1 else ()
    x = jax.random.normal(key_a, (*lead, size, size), jnp.float32).astype(dtype)
    y = (jax.random.normal(key_b, (*lead, size, size), jnp.float32) * size**-0.5).astype(dtype)
    flags = {"nn": {}, "nt": {"transpose_b": True}, "tn": {"transpose_a": True}}[product]
    return x, y, flags


def xla(product: str) -> Any:
    import jax.numpy as jnp

    return {
        "nn": jnp.matmul,
        "nt": lambda g, b: jnp.matmul(g, jnp.swapaxes(b, -1, -2)),
        "tn": lambda a, g: jnp.matmul(jnp.swapaxes(a, -1, -2), g),
    }[product]


Program = tuple[int, ...]  # (bm, bk, bn), and with --batch the entries a step folds


def distinct_tilings(size: int, batch: int = 1) -> dict[Program, list[tuple[int, int, int]]]:
    """Each program the kernel runs (its effective tiles, and with a batch the entries one
    step multiplies) and the tilings that give it. A batch adds each blocks' unfolded
    program: the blocks as the tile fold nothing (``batch_block``)."""
    from kernels.matmul import BlockSizes
    from kernels.matmul.kernel import batch_block

    programs: dict[Program, list[tuple[int, int, int]]] = {}
    for tile in itertools.product(SIZES, repeat=3):
        e = BlockSizes(*tile).within(size, size, size)
        blocks = (e.block_m, e.block_k, e.block_n)
        if batch == 1:
            programs.setdefault(blocks, []).append(tile)
            continue
        programs.setdefault((*blocks, batch_block(batch, BlockSizes(*tile), e)), []).append(tile)
        programs.setdefault((*blocks, 1), [])
    return programs


def compile_all(
    x: Any, y: Any, flags: dict[str, bool], size: int, workers: int, batch: int = 1
) -> list[dict[str, Any]]:
    import jax

    from kernels.matmul import BlockSizes
    from kernels.matmul.kernel import matmul_tiled

    programs = distinct_tilings(size, batch)

    def build(program: Program) -> dict[str, Any]:
        # The tile that makes this program: its first tiling, else (unfolded) its blocks.
        tilings = programs[program]
        blocks = BlockSizes(*(tilings[0] if tilings else program[:3]))
        fn = jax.jit(lambda a, b: matmul_tiled(a, b, block_sizes=blocks, **flags))
        row: dict[str, Any] = {"program": list(program)}
        began = time.monotonic()
        try:
            row["compiled"] = fn.lower(x, y).compile()
            row["compiles"] = True
        except Exception as exc:  # the compiler's refusal is the datum
            row["compiles"] = False
            row["reason"] = one_line(exc)
        row["compile_s"] = round(time.monotonic() - began, 2)
        return row

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        rows = list(pool.map(build, programs))
    for row in rows:
        row["tilings"] = [list(t) for t in programs[tuple(row["program"])]]
    return rows


def time_all(rows: list[dict[str, Any]], product: str, x: Any, y: Any, repeats: int) -> float:
    """Each compiled program's median device µs into its row; XLA's median µs returned."""
    import jax

    from ci_bench.measure.timers import assign, executions_in

    fns = [r["compiled"] for r in rows if r["compiles"]] + [jax.jit(xla(product))]
    for fn in fns:  # warm up outside the trace
        jax.block_until_ready(fn(x, y))
    calls: list[int] = []
    with tempfile.TemporaryDirectory(prefix="sweep-") as folder:
        jax.profiler.start_trace(folder)
        try:
            for _ in range(repeats):
                for index, fn in enumerate(fns):
                    jax.block_until_ready(fn(x, y))
                    calls.append(index)
        finally:
            jax.profiler.stop_trace()
        (trace,) = Path(folder).rglob("*.xplane.pb")
        profile = jax.profiler.ProfileData.from_file(str(trace))
    per_fn = assign(executions_in(profile, len(calls))[-len(calls) :], calls, len(fns))
    medians = [statistics.median(s) * 1e6 for s in per_fn]
    for row, us in zip((r for r in rows if r["compiles"]), medians, strict=False):
        row["median_us"] = us
    return medians[-1]


def sweep(opts: argparse.Namespace) -> int:
    from tpu_microbench import provenance

    opts.out.mkdir(parents=True, exist_ok=True)
    path = opts.out / "sweep.json"
    found: dict[str, Any] = {"provenance": provenance(), "repeats": opts.repeats, "sweeps": []}
    start = time.monotonic()
    for product, size, dtype in itertools.product(
        opts.products.split(","), [int(s) for s in opts.sizes.split(",")], opts.dtypes.split(",")
    ):
        label = f"{product} {size}³ {dtype}" + (f" B{opts.batch}" if opts.batch > 1 else "")
        if time.monotonic() - start > opts.deadline:
            found["sweeps"].append({"product": product, "size": size, "dtype": dtype})
            found["sweeps"][-1]["skipped"] = "deadline"
            print(f"{label}: skipped (deadline)", flush=True)
            continue
        began = time.monotonic()
        x, y, flags = operands(product, size, dtype, opts.batch)
        rows = compile_all(x, y, flags, size, opts.workers, opts.batch)
        compiled = time.monotonic() - began
        xla_us = time_all(rows, product, x, y, opts.repeats)
        for row in rows:
            row.pop("compiled", None)
        entry = {"product": product, "size": size, "dtype": dtype, "xla_us": xla_us}
        entry |= {"batch": opts.batch} if opts.batch > 1 else {}
        entry |= {"compile_s": round(compiled, 1), "programs": rows}
        found["sweeps"].append(entry)
        path.write_text(json.dumps(found, indent=1))
        timed = [r for r in rows if "median_us" in r]
        best = min(timed, key=lambda r: r["median_us"]) if timed else None
        print(
            f"{label}: {len(rows)} programs, {len(rows) - len(timed)} refused, "
            f"compiled in {compiled:.0f} s; XLA {xla_us:.1f} µs"
            + (f", best {tuple(best['program'])} {best['median_us']:.1f} µs" if best else ""),
            flush=True,
        )
    path.write_text(json.dumps(found, indent=1))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--sizes", default="1024,2048,4096")
    parser.add_argument("--dtypes", default="bfloat16,float32")
    parser.add_argument("--products", default="nn", help=f"comma-separated of {PRODUCTS}")
    parser.add_argument("--batch", type=int, default=1, help="operands [B, size, size]")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--workers", type=int, default=8, help="compile threads")
    parser.add_argument("--deadline", type=float, default=400.0, help="no sweep starts after")
    parser.add_argument("--quick", action="store_true", help="128-256 sizes, interpreted")
    parser.add_argument("--render", type=Path, nargs="+", help="sweep.json files: compare")
    opts = parser.parse_args()
    if opts.render:
        from tpu_matmul_sweep_report import render

        return render(opts.render)
    if opts.out is None:
        parser.error("--out is required unless --render")
    if opts.quick:
        global SIZES
        SIZES = (128, 256)
        opts.sizes, opts.repeats = "256", 2
    return sweep(opts)


if __name__ == "__main__":
    sys.exit(main())
