"""Chip microbenchmarks for the cost model (issue 51): what one Pallas kernel's parts cost
on this TPU, each measured alone, never on the kernels that judge the model.

Run from the repository's root on a TPU host (ci-bench importable), output under OUT:

    python benchmarks/tpu_microbench.py --out "$OUT"                 # every benchmark
    python benchmarks/tpu_microbench.py --out "$OUT" --only dot,step  # some of them
    python benchmarks/tpu_microbench.py --out /tmp/x --quick          # the plumbing, on a CPU

Device time per call comes from a jax.profiler trace (``ci_bench.measure.timers``'s reading
of the trace's XLA Modules line, the project's profiler timer): the median of ``--repeats``
calls after a warmup. The benchmarks:

  dot     a tiled matmul (512³ tiles, 4096³) per operand dtypes and precision: float32 at
          DEFAULT, HIGH and HIGHEST, float32 x bfloat16, bfloat16, int8 -> int32; the FLOP
          rate of each, and its ratio to bfloat16's (the passes a float32 dot costs);
  step    a grid of 1 ... 4096 steps of a body that does next to nothing: the per-step
          cost (the slope) and the fixed per-call cost (the intercept), by least squares;
  hbm     a streaming copy through VMEM (f32, 1 GiB moved): HBM bandwidth, read + write;
  vector  chains of dependent element-wise work on a VMEM-resident block: vector ALU
          (add, mul), transcendental (exp, tanh), cross-lane (a lane reduction, a
          transpose): elements per cycle-free second, per operation;
  vmem    which matmul tilings compile: each (bm, bk, bn) of bf16 and f32 at the default
          scoped VMEM limit and at ``vmem_limit_bytes`` = 32 and 64 MiB, and the compiler's
          reason when it refuses (what decides CompileTimeScopedVmemOom).

Writes ``microbench.json`` (provenance: chip, jax, jaxlib, libtpu, date; every figure with
the benchmark that measured it) and prints a table. ``--quick`` shrinks every size so the
script's own logic runs in interpret mode on a CPU (its figures are not the chip's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BENCHMARKS = ("dot", "step", "hbm", "vector", "vmem")


def device_us(fn: Callable[..., Any], args: tuple[Any, ...], repeats: int) -> float:
    """Median device time of one call, in µs (wall time on a CPU, which has no device
    plane: ``executions_in`` then reads the CPU client's ops)."""
    return jitted_device_us(jax.jit(fn), args, repeats)


def jitted_device_us(jitted: Any, args: tuple[Any, ...], repeats: int) -> float:
    """``device_us`` of a function already jitted (with layouts or shardings of its own)."""
    from ci_bench.measure.timers import executions_in

    jax.block_until_ready(jitted(*args))  # compile and warm up outside the trace
    jax.block_until_ready(jitted(*args))
    with tempfile.TemporaryDirectory(prefix="microbench-") as folder:
        jax.profiler.start_trace(folder)
        try:
            for _ in range(repeats):
                jax.block_until_ready(jitted(*args))
        finally:
            jax.profiler.stop_trace()
        (trace,) = Path(folder).rglob("*.xplane.pb")
        profile = jax.profiler.ProfileData.from_file(str(trace))
    runs = executions_in(profile, repeats)
    return statistics.median(r.device_ns for r in runs[-repeats:]) / 1e3


def tiled_dot(
    size: int, tile: int, a_dtype: Any, b_dtype: Any, precision: Any, out_dtype: Any
) -> tuple[Callable[..., Any], tuple[Any, ...], int]:
    """A size³ matmul in tile³ blocks with a float32 (int32) accumulator; its FLOPs."""
    steps = size // tile

    def body(a_ref, b_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(
            a_ref[...], b_ref[...], precision=precision, preferred_element_type=acc_ref.dtype
        )

        @pl.when(pl.program_id(2) == steps - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    acc = jnp.int32 if jnp.dtype(out_dtype) == jnp.int32 else jnp.float32
    call = pl.pallas_call(
        body,
        grid=(steps, steps, steps),
        in_specs=[
            pl.BlockSpec((tile, tile), lambda i, j, k: (i, k)),
            pl.BlockSpec((tile, tile), lambda i, j, k: (k, j)),
        ],
        out_specs=pl.BlockSpec((tile, tile), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((size, size), out_dtype),
        scratch_shapes=[pltpu.VMEM((tile, tile), acc)],
        interpret=INTERPRET,
    )
    key_a, key_b = jax.random.split(jax.random.PRNGKey(0))
    if jnp.issubdtype(a_dtype, jnp.integer):
        a = jax.random.randint(key_a, (size, size), -8, 8, jnp.int32).astype(a_dtype)
        b = jax.random.randint(key_b, (size, size), -8, 8, jnp.int32).astype(b_dtype)
    else:
        a = jax.random.normal(key_a, (size, size), jnp.float32).astype(a_dtype)
        b = jax.random.normal(key_b, (size, size), jnp.float32).astype(b_dtype)
    return call, (a, b), 2 * size**3


def bench_dot(quick: bool, repeats: int) -> list[dict[str, Any]]:
    size, tile = (256, 128) if quick else (4096, 512)
    f32, bf16 = jnp.float32, jnp.bfloat16
    precision = jax.lax.Precision
    variants = [
        ("bf16 x bf16", bf16, bf16, precision.DEFAULT, f32),
        ("f32 x f32 DEFAULT", f32, f32, precision.DEFAULT, f32),
        ("f32 x f32 HIGH", f32, f32, precision.HIGH, f32),
        ("f32 x f32 HIGHEST", f32, f32, precision.HIGHEST, f32),
        ("f32 x bf16 DEFAULT", f32, bf16, precision.DEFAULT, f32),
        ("int8 x int8 -> int32", jnp.int8, jnp.int8, precision.DEFAULT, jnp.int32),
    ]
    rows = []
    for name, a_dtype, b_dtype, prec, out_dtype in variants:
        try:
            fn, args, flops = tiled_dot(size, tile, a_dtype, b_dtype, prec, out_dtype)
            us = device_us(fn, args, repeats)
            rows.append({"bench": "dot", "case": name, "us": us, "tflops": flops / us / 1e6})
        except Exception as exc:  # a dtype the chip or interpreter refuses: said, not fatal
            rows.append({"bench": "dot", "case": name, "error": str(exc).splitlines()[0][:200]})
    bf16_rate = next((r["tflops"] for r in rows if r["case"] == "bf16 x bf16" and "us" in r), 0)
    for row in rows:
        if "tflops" in row and bf16_rate:
            row["passes_vs_bf16"] = bf16_rate / row["tflops"]
    return rows


def bench_step(quick: bool, repeats: int) -> list[dict[str, Any]]:
    """A (8, 128) f32 block copied per step over grids of n steps: time = a + b * n."""
    counts = (1, 4, 16) if quick else (1, 16, 64, 256, 1024, 4096)
    points = []
    for n in counts:
        x = jnp.ones((8 * n, 128), jnp.float32)

        def body(x_ref, o_ref):
            o_ref[...] = x_ref[...]

        call = pl.pallas_call(
            body,
            grid=(n,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            interpret=INTERPRET,
        )
        points.append((n, device_us(call, (x,), repeats)))
    mean_n = statistics.fmean(n for n, _ in points)
    mean_t = statistics.fmean(t for _, t in points)
    slope = sum((n - mean_n) * (t - mean_t) for n, t in points) / sum(
        (n - mean_n) ** 2 for n, _ in points
    )
    rows = [{"bench": "step", "case": f"{n} steps", "us": t} for n, t in points]
    rows.append({"bench": "step", "case": "per step (slope)", "us": slope})
    rows.append({"bench": "step", "case": "per call (intercept)", "us": mean_t - slope * mean_n})
    return rows


def bench_hbm(quick: bool, repeats: int) -> list[dict[str, Any]]:
    rows_n, block = (256, 64) if quick else (131072, 512)  # 131072 x 1024 f32 = 512 MiB
    x = jnp.ones((rows_n, 1024), jnp.float32)

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    call = pl.pallas_call(
        body,
        grid=(rows_n // block,),
        in_specs=[pl.BlockSpec((block, 1024), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((block, 1024), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=INTERPRET,
    )
    us = device_us(call, (x,), repeats)
    moved = 2 * x.size * 4
    return [{"bench": "hbm", "case": "copy f32 (read + write)", "us": us, "gb_s": moved / us / 1e3}]


VECTOR_OPS: dict[str, Callable[[Any], Any]] = {
    "add": lambda v: v + 1.0001,
    "mul": lambda v: v * 1.0001,
    "exp": lambda v: jnp.exp(v * -0.001),
    "tanh": jnp.tanh,
    "lane sum": lambda v: v - jnp.sum(v, axis=-1, keepdims=True) * 1e-3,
    "transpose": lambda v: v.T * 1.0001,
}


def bench_vector(quick: bool, repeats: int) -> list[dict[str, Any]]:
    """``chain`` dependent applications of each operation on a (512, 512) f32 block held in
    VMEM: µs per chain, and elements per ns per operation."""
    side, chain = (128, 4) if quick else (512, 64)
    x = jnp.full((side, side), 0.5, jnp.float32)
    rows = []
    for name, op in VECTOR_OPS.items():

        def body(x_ref, o_ref, op=op):
            v = x_ref[...]
            for _ in range(chain):
                v = op(v)
            o_ref[...] = v

        call = pl.pallas_call(
            body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=INTERPRET
        )
        us = device_us(call, (x,), repeats)
        rows.append(
            {
                "bench": "vector",
                "case": name,
                "us": us,
                "elements_per_ns": x.size * chain / us / 1e3,
            }
        )
    return rows


def bench_vmem(quick: bool, repeats: int) -> list[dict[str, Any]]:
    """Which tilings of a 4096³ matmul compile, per dtype and scoped VMEM limit."""
    size = 512 if quick else 4096
    tiles = (128, 256) if quick else (512, 1024, 2048)
    limits = (None,) if quick else (None, 64 << 20)
    rows = []
    for dtype in (jnp.bfloat16, jnp.float32):
        for bm in tiles:
            for bk in tiles:
                for bn in tiles:
                    for limit in limits:
                        rows.append(_compiles(size, (bm, bk, bn), dtype, limit))
                        PARTIAL.write_text(json.dumps(rows))  # a call stopped early keeps them
    return rows


def _compiles(
    size: int, tile: tuple[int, int, int], dtype: Any, limit: int | None
) -> dict[str, Any]:
    bm, bk, bn = tile
    steps_k = size // bk

    def body(a_ref, b_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

        @pl.when(pl.program_id(2) == steps_k - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    call = pl.pallas_call(
        body,
        grid=(size // bm, size // bn, steps_k),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
            pl.BlockSpec((bk, bn), lambda i, j, k: (k, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((size, size), dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=limit),
        interpret=INTERPRET,
    )
    shape = jax.ShapeDtypeStruct((size, size), dtype)
    row: dict[str, Any] = {
        "bench": "vmem",
        "case": f"{jnp.dtype(dtype).name} {bm}x{bk}x{bn}",
        "vmem_limit_bytes": limit,
        # double-buffered inputs and output, the accumulator: the model's own count
        "counted_bytes": 2 * (bm * bk + bk * bn + bm * bn) * jnp.dtype(dtype).itemsize
        + bm * bn * 4,
    }
    try:
        jax.jit(call).lower(shape, shape).compile()
        row["compiles"] = True
    except Exception as exc:
        row["compiles"] = False
        row["reason"] = one_line(exc)
    return row


BENCH: dict[str, Callable[[bool, int], list[dict[str, Any]]]] = {
    "dot": bench_dot,
    "step": bench_step,
    "hbm": bench_hbm,
    "vector": bench_vector,
    "vmem": bench_vmem,
}
INTERPRET = False
PARTIAL = Path(tempfile.gettempdir()) / "microbench-vmem.json"


def one_line(exc: BaseException) -> str:
    """An exception as one line of a row's ``error`` (a refused shape, a failed compile)."""
    return " ".join(str(exc).split())[:300] or type(exc).__name__


def provenance() -> dict[str, Any]:
    """Chip, jax, libtpu and date, and the script that ran (the command's own, not this
    module's: the sweeps and probes import this)."""
    from ci_bench.measure.devices import fingerprint

    device = fingerprint()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "device": device.model_dump(mode="json"),
        "script": f"benchmarks/{Path(sys.argv[0]).name}",
    }


def table(rows: list[dict[str, Any]]) -> str:
    from tabulate import tabulate

    keys = ["bench", "case", "us", "tflops", "passes_vs_bf16", "gb_s", "elements_per_ns", "cycles"]
    keys += ["vmem_limit_bytes", "counted_bytes", "compiles", "error"]
    shown = [k for k in keys if any(k in r for r in rows)]
    return tabulate([[r.get(k, "") for k in shown] for r in rows], headers=shown, floatfmt=".4g")


def main() -> int:
    global INTERPRET
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", default=",".join(BENCHMARKS), help="comma-separated")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, interpret mode")
    parser.add_argument("--deadline", type=float, default=540.0, help="seconds for the whole")
    args = parser.parse_args()
    INTERPRET = args.quick or jax.default_backend() == "cpu"
    args.out.mkdir(parents=True, exist_ok=True)
    global PARTIAL
    PARTIAL = args.out / "vmem-partial.json"
    start = time.monotonic()
    found: dict[str, Any] = {"provenance": provenance(), "interpret": INTERPRET, "rows": []}
    for name in args.only.split(","):
        if time.monotonic() - start > args.deadline:
            found["rows"].append({"bench": name, "case": "skipped", "error": "deadline"})
            continue
        began = time.monotonic()
        found["rows"] += BENCH[name](args.quick, args.repeats)
        found.setdefault("seconds", {})[name] = round(time.monotonic() - began, 1)
        (args.out / "microbench.json").write_text(json.dumps(found, indent=1))  # after each
    print(table(found["rows"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
