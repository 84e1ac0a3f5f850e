"""HBM rate by the streams a Pallas pipeline keeps in flight: chip microbenchmarks (issue 51).

The cost model's v5e HBM rate is a streaming copy's, 656.6 GB/s (``tpu_microbench.py hbm``:
one input and one output block stream). Kernels that move more streams at once go faster:
jax's megablox tgmm moves 268 MiB in 343 µs (783 GB/s), XLA's own B16-1024³ float32 dot
786 GB/s, where the model's rate makes them 1.18-1.34x slower than the chip. These
benchmarks time grid pipelines that do nothing but move bytes, never the kernels that judge
the model:

  streams  k input and j output streams of (block, 1024) float32 blocks over one grid
           (k = 1 ... 4, j = 0 ... 2; j = 0 writes one small block once), each stream
           128 MiB: the rate by how many copies the pipeline keeps in flight and their mix;
  blocks   one in, one out, by block size (0.25 ... 8 MiB): what a step's DMA size adds;
  xla      XLA's own fused elementwise programs over the same arrays (1 in 1 out, 2 in 1
           out, 1 in 2 out): what the chip gives a program that is not a pallas_call.

Run from the repository's root on a TPU host; device time from the profiler:

    python benchmarks/tpu_microbench_hbm.py --out "$OUT"
    python benchmarks/tpu_microbench_hbm.py --out /tmp/hbm --quick   # plumbing, on a CPU

Writes ``microbench_hbm.json`` (after each benchmark) and prints a table.
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

from tpu_microbench import device_us, provenance, table  # noqa: E402

INTERPRET = False
LANES = 1024
# Six streams of 8 MiB blocks, two buffers each, pass the 16 MiB scoped default
VMEM_LIMIT = 100 << 20


def stream_call(rows: int, block: int, k: int, j: int) -> tuple[Any, tuple[Any, ...]]:
    """A grid over ``rows // block`` steps reading k ``(rows, LANES)`` f32 arrays and writing
    j of them (j = 0: one (8, LANES) block, its index fixed, written back once)."""
    xs = tuple(jnp.full((rows, LANES), i + 1.0, jnp.float32) for i in range(k))

    def body(*refs):
        ins, outs = refs[:k], refs[k:]
        total = ins[0][...]
        for ref in ins[1:]:
            total = total + ref[...]
        if j == 0:
            outs[0][...] = total[:8]
        for n, ref in enumerate(outs if j else ()):
            ref[...] = total + n

    if j == 0:
        out_specs = [pl.BlockSpec((8, LANES), lambda s: (0, 0))]
        out_shape = [jax.ShapeDtypeStruct((8, LANES), jnp.float32)]
    else:
        out_specs = [pl.BlockSpec((block, LANES), lambda s: (s, 0))] * j
        out_shape = [jax.ShapeDtypeStruct((rows, LANES), jnp.float32)] * j
    call = pl.pallas_call(
        body,
        grid=(rows // block,),
        in_specs=[pl.BlockSpec((block, LANES), lambda s: (s, 0))] * k,
        out_specs=out_specs,
        out_shape=out_shape,
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=VMEM_LIMIT),
        interpret=INTERPRET,
    )
    return call, xs


def _row(bench: str, case: str, us: float, moved: int, **extra: Any) -> dict[str, Any]:
    return {
        "bench": bench,
        "case": case,
        "us": us,
        "mib": moved / 2**20,
        "gb_s": moved / us / 1e3,
        **extra,
    }


def bench_streams(quick: bool, repeats: int) -> list[dict[str, Any]]:
    rows_n, block = (64, 16) if quick else (32768, 512)  # 128 MiB a stream, 2 MiB blocks
    found = []
    for k in (1, 2) if quick else (1, 2, 3, 4):
        for j in (0, 1) if quick else (0, 1, 2):
            call, xs = stream_call(rows_n, block, k, j)
            us = device_us(call, xs, repeats)
            moved = (k + j) * rows_n * LANES * 4
            found.append(_row("streams", f"{k} in, {j} out", us, moved, reads=k, writes=j))
    return found


def bench_blocks(quick: bool, repeats: int) -> list[dict[str, Any]]:
    rows_n = 64 if quick else 32768
    found = []
    for block in (8, 16) if quick else (64, 256, 512, 1024, 2048):
        call, xs = stream_call(rows_n, block, 1, 1)
        us = device_us(call, xs, repeats)
        moved = 2 * rows_n * LANES * 4
        mib = block * LANES * 4 / 2**20
        found.append(_row("blocks", f"1 in, 1 out, {mib:g} MiB blocks", us, moved, block_mib=mib))
    return found


def bench_xla(quick: bool, repeats: int) -> list[dict[str, Any]]:
    rows_n = 64 if quick else 32768
    x = jnp.full((rows_n, LANES), 1.0, jnp.float32)
    y = jnp.full((rows_n, LANES), 2.0, jnp.float32)
    programs = {
        "1 in, 1 out": (lambda x: x * 2.0 + 1.0, (x,), 2),
        "2 in, 1 out": (lambda x, y: x * y + 1.0, (x, y), 3),
        "1 in, 2 out": (lambda x: (x + 1.0, x * 3.0), (x,), 3),
    }
    found = []
    for case, (fn, args, streams) in programs.items():
        us = device_us(fn, args, repeats)
        found.append(_row("xla", case, us, streams * rows_n * LANES * 4))
    return found


BENCH = {"streams": bench_streams, "blocks": bench_blocks, "xla": bench_xla}


def main() -> int:
    global INTERPRET
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", default=",".join(BENCH))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, interpret mode")
    args = parser.parse_args()
    INTERPRET = args.quick or jax.default_backend() == "cpu"
    args.out.mkdir(parents=True, exist_ok=True)
    found: dict[str, Any] = {"provenance": provenance(), "interpret": INTERPRET, "rows": []}
    found["provenance"]["script"] = "benchmarks/tpu_microbench_hbm.py"
    for name in args.only.split(","):
        began = time.monotonic()
        try:
            found["rows"] += BENCH[name](args.quick, 3 if args.quick else args.repeats)
        except Exception as exc:  # one benchmark's failure is said; the others still run
            error = " ".join(str(exc).split())[:300]
            found["rows"].append({"bench": name, "case": "failed", "error": error})
        found.setdefault("seconds", {})[name] = round(time.monotonic() - began, 1)
        (args.out / "microbench_hbm.json").write_text(json.dumps(found, indent=1))
    print(table(found["rows"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
