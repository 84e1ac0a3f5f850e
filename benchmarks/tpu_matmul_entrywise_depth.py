"""How far ahead the DMA matmul should read: chip time by the number of entries in VMEM.

matmul 0.10.0's DMA kernel (``kernels.matmul.entrywise``) keeps two entries in VMEM and reads
one entry ahead of its multiply. At batched 127³ float32 on a TPU v5e it ran 1.16-1.61x
XLA (B16-127³ forward 9.6 against 6.0 µs, ``tpu_v5e_matmul_middle_full_0.10.0_2026-12-07``):
each entry's reads are small (64 KiB) and their round trip, not the multiply, sets the
pace. This script times the kernel, forward and backward, with ``buffers`` entries in VMEM
(reads started ``buffers - 1`` entries ahead) beside XLA's ``jnp.matmul`` and its VJP, each
output checked against ``jnp.matmul`` at HIGHEST precision.

Run from the repository's root on a TPU host (device time from the profiler):

    python benchmarks/tpu_matmul_entrywise_depth.py --out "$OUT"
    python benchmarks/tpu_matmul_entrywise_depth.py --out /tmp/depth --quick   # on a CPU

Writes ``matmul_entrywise_depth.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from tpu_matmul_batch_middle import error, swap_last  # noqa: E402
from tpu_microbench import jitted_device_us, provenance  # noqa: E402

from kernels.matmul import entrywise  # noqa: E402

SHAPES = ((4, 127), (16, 127), (4, 513), (16, 513))
DEPTHS = (2, 3, 4, 8, 16)
LIMIT = 100 << 20  # past every need here, within a v5e's 128 MiB


def subjects(batch: int, interpret: bool) -> dict[str, tuple[str, Any]]:
    out: dict[str, tuple[str, Any]] = {
        "xla fwd": ("fwd", jnp.matmul),
        "xla bwd": ("bwd", lambda a, b, g: jax.vjp(jnp.matmul, a, b)[1](g)),
    }
    for depth in (d for d in DEPTHS if d <= batch):
        out[f"dma fwd x{depth}"] = (
            "fwd",
            lambda a, b, d=depth: entrywise.entrywise_matmul(a, b, interpret=interpret, buffers=d),
        )
        out[f"dma bwd x{depth}"] = (
            "bwd",
            lambda a, b, g, d=depth: entrywise.entrywise_backward(
                a, b, g, vmem_limit=LIMIT, interpret=interpret, buffers=d
            ),
        )
    return out


def measure(batch: int, size: int, repeats: int) -> list[dict[str, Any]]:
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    a = jax.random.normal(keys[0], (batch, size, size), jnp.float32)
    b = jax.random.normal(keys[1], (batch, size, size), jnp.float32) * size**-0.5
    g = jax.random.normal(keys[2], (batch, size, size), jnp.float32) * size**-0.5
    hi = jax.lax.Precision.HIGHEST
    want = {
        "fwd": [jnp.matmul(a, b, precision=hi)],
        "bwd": [
            jnp.matmul(g, swap_last(b), precision=hi),
            jnp.matmul(swap_last(a), g, precision=hi),
        ],
    }
    rows = []
    for name, (mode, fn) in subjects(batch, jax.default_backend() == "cpu").items():
        args = (a, b) if mode == "fwd" else (a, b, g)
        jitted = jax.jit(fn)
        try:
            got = jitted(*args)
            got = [got] if mode == "fwd" else list(got)
            row = {"max_rel_error": max(map(error, got, want[mode]))}
            row["us"] = jitted_device_us(jitted, args, repeats)
        except Exception as exc:  # a depth past the chip's VMEM: say so, go on
            row = {"error": " ".join(str(exc).split())[:300]}
        rows.append({"shape": [batch, size, size, size], "subject": name, **row})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="one small shape, few repeats")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    shapes = ((3, 24),) if args.quick else SHAPES
    rows = []
    for batch, size in shapes:
        rows += measure(batch, size, 3 if args.quick else args.repeats)
    record = {"provenance": provenance(), "rows": rows}
    (args.out / "matmul_entrywise_depth.json").write_text(json.dumps(record, indent=1) + "\n")
    for row in rows:
        figure = f"{row['us']:8.1f} µs" if "us" in row else "refused"
        print(f"{row['shape']} {row['subject']:16} {figure}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
