"""The matmul reading XLA's own layout of unaligned batched arrays: chip time.

On a TPU, XLA stores ``f32[4, 513, 513]`` (and ``f32[1, 513, 513]``, ``bf16[4, 513, 513]``) as
``{2,0,1}``: the batch axis second minor, so no row is padded from 513 to 520. A
``pallas_call`` takes its operands row-major, so XLA copies both operands in and the result
out around the tiled kernel (``tpu_matmul_layouts.py``: 8.8-9.0 µs of B4-513³'s 23.6-34.3).
This script asks the chip which layout it stores each profile shape in, then times the
kernel as it ships (``kernels.matmul.pallas``: since 0.9.0 the DMA kernel where it applies),
the DMA kernel itself (``kernels.matmul.entrywise``: each batch entry's matrices DMAed
whole from the stored array, ``a.at[:, i, :]``, no copies; forward and backward), and XLA's
``jnp.matmul``, each output checked against ``jnp.matmul`` at HIGHEST precision.

Two earlier versions of this script measured what led there, on a TPU v5e on 2026-12-07:
commit 4a147a1 read the layout through block specs with the batch as each block's middle
axis (``benchmarks/data/tpu_v5e_matmul_batch_middle_2026-12-07.json``: slower than XLA's
copies, B4 float32 forward 45.4 against 34.3 µs, bfloat16 6x), and commit db453c9 held the
DMA kernel's prototype, one buffer or two, beside matmul 0.8.0's tiled kernel
(``tpu_v5e_matmul_batch_middle_dma_2026-12-07.json``: B4-513³ float32 24.7 against 34.4 µs).

Run from the repository's root on a TPU host (device time from the profiler):

    python benchmarks/tpu_matmul_batch_middle.py --out "$OUT"
    python benchmarks/tpu_matmul_batch_middle.py --out /tmp/mid --quick   # plumbing, on a CPU

Writes ``matmul_batch_middle.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
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

from tpu_matmul_layouts import copies_and_layout  # noqa: E402
from tpu_microbench import jitted_device_us, provenance  # noqa: E402

import kernels.matmul as matmul_kernel  # noqa: E402
from kernels.matmul import entrywise  # noqa: E402

SHAPES = ((4, 513, 513, 513), (1, 513, 513, 513))
LAYOUT_SHAPES = [(b, s, s) for b in (1, 4, 16) for s in (127, 128, 513, 1024)]


def swap_last(x: jax.Array) -> jax.Array:
    return jnp.swapaxes(x, -1, -2)


def error(got: Any, want: Any) -> float:
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def subjects(interpret: bool) -> dict[str, tuple[str, Any]]:
    """Each subject's mode (``fwd``: ``(a, b)``, ``bwd``: ``(a, b, g)``) and function."""

    def dma_backward(a, b, g):
        limit = 64 << 20  # within a v5e's VMEM for every shape here
        return entrywise.entrywise_backward(a, b, g, vmem_limit=limit, interpret=interpret)

    return {
        "shipped fwd": ("fwd", matmul_kernel.pallas),
        "dma fwd": ("fwd", lambda a, b: entrywise.entrywise_matmul(a, b, interpret=interpret)),
        "xla fwd": ("fwd", jnp.matmul),
        "shipped bwd": ("bwd", lambda a, b, g: jax.vjp(matmul_kernel.pallas, a, b)[1](g)),
        "dma bwd": ("bwd", dma_backward),
        "xla bwd": ("bwd", lambda a, b, g: jax.vjp(jnp.matmul, a, b)[1](g)),
    }


def measure(shape, dtype, repeats: int) -> list[dict[str, Any]]:
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
    for name, (mode, fn) in subjects(interpret).items():
        args = (a, b) if mode == "fwd" else (a, b, g)
        jitted = jax.jit(fn)
        try:
            got = jitted(*args)
            err = (
                error(got, want_fwd)
                if mode == "fwd"
                else max(error(got[0], want_da), error(got[1], want_db))
            )
            copies = copies_and_layout(jitted, args)[0]
            row = {"copies": copies, "us": jitted_device_us(jitted, args, repeats)}
            row["max_rel_error"] = err
        except Exception as exc:  # a tiling the chip refuses: say so, go on
            row = {"error": " ".join(str(exc).split())[:300]}
        rows.append({"shape": list(shape), "dtype": jnp.dtype(dtype).name, "subject": name, **row})
        print(json.dumps(rows[-1]), flush=True)
    return rows


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
                layouts[key] = entrywise.default_layout(shape, dtype)
        print(json.dumps(layouts, indent=1), flush=True)
    shapes = ((2, 40, 300, 130),) if args.quick else SHAPES
    repeats = 3 if args.quick else args.repeats
    rows = []
    for shape in shapes:
        for dtype in (jnp.float32, jnp.bfloat16):
            rows += measure(shape, dtype, repeats)
    record = {"provenance": provenance(), "default_layouts": layouts, "rows": rows}
    (args.out / "matmul_batch_middle.json").write_text(json.dumps(record, indent=1) + "\n")
    for row in rows:
        figure = f"{row['us']:8.1f} µs" if "us" in row else "refused"
        print(f"{row['dtype']:9} {row['shape']} {row['subject']:34} {figure}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
