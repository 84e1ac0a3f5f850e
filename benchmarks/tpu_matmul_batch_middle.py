"""The matmul reading XLA's own layout of unaligned batched arrays: chip time, per tiling.

On a TPU, XLA stores ``f32[4, 513, 513]`` (and ``f32[1, 513, 513]``, ``bf16[4, 513, 513]``) as
``{2,0,1}``: the batch axis second minor, so no row is padded from 513 to 520. A
``pallas_call`` takes its operands row-major, so XLA copies both operands in and the result
out around it (``tpu_matmul_layouts.py``: 8.8-9.0 µs of B4-513³'s 23.6-34.3). Swapped to
``[M, B, K]``, the same bytes are a row-major array: XLA passes it as a bitcast, and the
kernel reads each batch entry as the middle axis of its blocks (``kernel._tpu_call``'s
``batch_axis=1``). This script asks the chip which layout it stores each profile shape in,
then times, per shape and dtype where that layout is batch-middle, the forward and the
backward (two calls: dA = g·Bᵀ, dB = Aᵀ·g) read that way over several tilings, beside the
kernel as it ships (its tuned tiles, XLA's copies included) and ``jnp.matmul``, and checks
each output against ``jnp.matmul`` at HIGHEST precision.

Run from the repository's root on a TPU host (device time from the profiler):

    python benchmarks/tpu_matmul_batch_middle.py --out "$OUT"
    python benchmarks/tpu_matmul_batch_middle.py --out /tmp/mid --quick   # plumbing, on a CPU

Writes ``matmul_batch_middle.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from tpu_microbench import jitted_device_us, provenance  # noqa: E402

import kernels.matmul as matmul_kernel  # noqa: E402
from kernels.matmul.kernel import Blocks, _tpu_call  # noqa: E402

SHAPES = ((4, 513, 513, 513), (1, 513, 513, 513))
LAYOUT_SHAPES = [(b, s, s) for b in (1, 4, 16) for s in (127, 128, 513, 1024)]
LIMIT = 64 << 20  # every tiling below within it on a v5e (128 MiB of VMEM)


def default_layout(shape: tuple[int, ...], dtype: Any) -> str:
    """The layout the chip's client stores a new array of this shape in."""
    device = jax.devices()[0]
    return str(device.client.get_default_layout(np.dtype(dtype), shape, device))


def swap(x: jax.Array) -> jax.Array:
    return jnp.swapaxes(x, 0, 1)


def forward_middle(blocks: Blocks, interpret: bool):
    def run(a, b):
        B, K = a.shape[0], a.shape[2]
        out = _tpu_call(
            swap(a), swap(b), blocks, B, K, interpret, batch_axis=1, vmem_limit_bytes=LIMIT
        )
        return swap(out)

    return run


def backward_middle(da_blocks: Blocks, db_blocks: Blocks, interpret: bool):
    def run(a, b, g):
        B, M, N = g.shape
        options = {"batch_axis": 1, "vmem_limit_bytes": LIMIT}
        da = _tpu_call(swap(g), swap(b), da_blocks, B, N, interpret, transpose_b=True, **options)
        db = _tpu_call(swap(a), swap(g), db_blocks, B, M, interpret, transpose_a=True, **options)
        return swap(da), swap(db)

    return run


def copies(jitted: Any, args: tuple[Any, ...]) -> int:
    text = jitted.lower(*args).compile().as_text()
    return len(re.findall(r"= \S+ copy(?:-start)?\(", text))


def error(got: Any, want: Any) -> float:
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


# Per (B, dtype): forward tilings (bm, bn) and backward ones (dA's bm, dB's bk), K whole.
# Few: Mosaic takes 20-75 s to compile each of these on a 2-core host (bfloat16's packed rows
# the slowest; a whole 513-row bfloat16 block about 5 minutes, so none is timed here).
TILINGS: dict[tuple[int, str], tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]] = {
    (4, "float32"): (((513, 513), (171, 513)), ((513, 513), (171, 256))),
    (1, "float32"): (((513, 513),), ((513, 513),)),
    (4, "bfloat16"): (((128, 513), (257, 256)), ((128, 256),)),
}


def subjects(shape, dtype: str, quick: bool, interpret: bool) -> dict[str, tuple[str, Any]]:
    """Each subject's mode (``fwd``: ``(a, b)``, ``bwd``: ``(a, b, g)``) and function."""
    B, M, K, N = shape
    found: dict[str, tuple[str, Any]] = {
        "shipped fwd": ("fwd", matmul_kernel.pallas),
        "xla fwd": ("fwd", jnp.matmul),
        "shipped bwd": ("bwd", lambda a, b, g: jax.vjp(matmul_kernel.pallas, a, b)[1](g)),
        "xla bwd": ("bwd", lambda a, b, g: jax.vjp(jnp.matmul, a, b)[1](g)),
    }
    forward, backward = ((M, N),), ((M, K),)
    if not quick:
        forward, backward = TILINGS.get((B, dtype), ((), ()))
    for bm, bn in forward:
        found[f"middle fwd bm={bm} bn={bn}"] = ("fwd", forward_middle(Blocks(bm, K, bn), interpret))
    for bm, bk in backward:
        found[f"middle bwd da bm={bm} db bk={bk}"] = (
            "bwd",
            backward_middle(Blocks(bm, N, K), Blocks(bk, M, N), interpret),
        )
    return found


def measure(shape, dtype, repeats: int, quick: bool) -> list[dict[str, Any]]:
    B, M, K, N = shape
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    a = jax.random.normal(keys[0], (B, M, K), jnp.float32).astype(dtype)
    b = (jax.random.normal(keys[1], (B, K, N), jnp.float32) * K**-0.5).astype(dtype)
    g = (jax.random.normal(keys[2], (B, M, N), jnp.float32) * N**-0.5).astype(dtype)
    hi = jax.lax.Precision.HIGHEST
    f32 = [x.astype(jnp.float32) for x in (a, b, g)]
    want_fwd = jnp.matmul(f32[0], f32[1], precision=hi)
    want_da = jnp.matmul(f32[2], swap_last(f32[1]), precision=hi)
    want_db = jnp.matmul(swap_last(f32[0]), f32[2], precision=hi)
    rows = []
    interpret = jax.default_backend() == "cpu"
    for name, (mode, fn) in subjects(shape, jnp.dtype(dtype).name, quick, interpret).items():
        args = (a, b) if mode == "fwd" else (a, b, g)
        jitted = jax.jit(fn)
        try:
            got = jitted(*args)
            err = (
                error(got, want_fwd)
                if mode == "fwd"
                else max(error(got[0], want_da), error(got[1], want_db))
            )
            row = {"copies": copies(jitted, args), "us": jitted_device_us(jitted, args, repeats)}
            row["max_rel_error"] = err
        except Exception as exc:  # a tiling the chip refuses: say so, go on
            row = {"error": " ".join(str(exc).split())[:300]}
        rows.append({"shape": list(shape), "dtype": jnp.dtype(dtype).name, "subject": name, **row})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def swap_last(x: jax.Array) -> jax.Array:
    return jnp.swapaxes(x, -1, -2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="one small shape, few repeats")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    layouts = {}
    if jax.default_backend() == "tpu":
        for shape in LAYOUT_SHAPES:
            for dtype in (jnp.float32, jnp.bfloat16):
                key = f"{jnp.dtype(dtype).name}{list(shape)}"
                layouts[key] = default_layout(shape, dtype)
        print(json.dumps(layouts, indent=1), flush=True)
    shapes = ((2, 40, 300, 130),) if args.quick else SHAPES
    repeats = 3 if args.quick else args.repeats
    rows = []
    for shape in shapes:
        for dtype in (jnp.float32, jnp.bfloat16):
            if args.quick or (shape[0], jnp.dtype(dtype).name) in TILINGS:
                rows += measure(shape, dtype, repeats, args.quick)
    record = {"provenance": provenance(), "default_layouts": layouts, "rows": rows}
    (args.out / "matmul_batch_middle.json").write_text(json.dumps(record, indent=1) + "\n")
    for row in rows:
        figure = f"{row['us']:8.1f} µs" if "us" in row else "refused"
        print(f"{row['dtype']:9} {row['shape']} {row['subject']:34} {figure}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
