"""The matmul reading XLA's own layout of unaligned batched arrays: chip time.

On a TPU, XLA stores ``f32[4, 513, 513]`` (and ``f32[1, 513, 513]``, ``bf16[4, 513, 513]``) as
``{2,0,1}``: the batch axis second minor, so no row is padded from 513 to 520. A
``pallas_call`` takes its operands row-major, so XLA copies both operands in and the result
out around it (``tpu_matmul_layouts.py``: 8.8-9.0 µs of B4-513³'s 23.6-34.3). Swapped to
``[M, B, K]``, the same bytes are a row-major array: XLA passes it as a bitcast. This script
asks the chip which layout it stores each profile shape in, then times ways of reading that
layout without XLA's copies, beside the kernel as it ships (its tuned tiles, the copies
included) and ``jnp.matmul``, each output checked against ``jnp.matmul`` at HIGHEST:

- ``dma``: each batch entry's ``[M, K]`` matrix is DMAed from the stored array
  (``a.at[:, i, :]``, a strided read) into a VMEM buffer, multiplied whole, and DMAed back
  (``seq``: one entry at a time; ``2buf``: the next entry's reads and the last one's write
  overlap the multiply). Forward only: a feasibility measurement, not the shipped kernel.

The first version of this script (commit 4a147a1, data
``benchmarks/data/tpu_v5e_matmul_batch_middle_2026-12-07.json``) read the layout through
block specs with the batch as each block's middle axis (strided vector loads in the kernel):
slower than XLA's copies (B4 float32 forward 45.4 against 34.3 µs, bfloat16 6x).

Run from the repository's root on a TPU host (device time from the profiler):

    python benchmarks/tpu_matmul_batch_middle.py --out "$OUT"
    python benchmarks/tpu_matmul_batch_middle.py --out /tmp/mid --quick   # plumbing, on a CPU

Writes ``matmul_batch_middle.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import functools
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

SHAPES = ((4, 513, 513, 513), (1, 513, 513, 513))
LAYOUT_SHAPES = [(b, s, s) for b in (1, 4, 16) for s in (127, 128, 513, 1024)]


def default_layout(shape: tuple[int, ...], dtype: Any) -> str:
    """The layout the chip's client stores a new array of this shape in."""
    device = jax.devices()[0]
    return str(device.client.get_default_layout(np.dtype(dtype), shape, device))


def swap(x: jax.Array) -> jax.Array:
    return jnp.swapaxes(x, 0, 1)


def _dma_kernel(a_hbm, b_hbm, o_hbm, a_v, b_v, o_v, sem, *, entries: int, buffers: int):
    """Entry i of [M, B, K] x [K, B, N] -> [M, B, N]: DMA in, multiply whole, DMA out."""
    from jax.experimental.pallas import tpu as pltpu

    def copy(src, dst, which: int, slot: int):
        return pltpu.make_async_copy(src, dst, sem.at[which, slot])

    def fetch(i: int):
        slot = i % buffers
        copy(a_hbm.at[:, i, :], a_v.at[slot], 0, slot).start()
        copy(b_hbm.at[:, i, :], b_v.at[slot], 1, slot).start()

    def store(i: int):
        slot = i % buffers
        return copy(o_v.at[slot], o_hbm.at[:, i, :], 2, slot)

    def multiply(i: int) -> None:
        slot = i % buffers
        copy(a_hbm.at[:, i, :], a_v.at[slot], 0, slot).wait()
        copy(b_hbm.at[:, i, :], b_v.at[slot], 1, slot).wait()
        a, b = a_v[slot], b_v[slot]
        if a.dtype == jnp.float32:  # one bfloat16 pass, as XLA's DEFAULT on a TPU
            a, b = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
        o_v[slot] = jnp.dot(a, b, preferred_element_type=jnp.float32).astype(o_v.dtype)

    if buffers == 1:  # in, multiply, out: nothing overlaps
        for i in range(entries):
            fetch(i)
            multiply(i)
            store(i).start()
            store(i).wait()
        return
    fetch(0)
    for i in range(entries):  # the next entry's reads and the last write overlap this one
        if i + 1 < entries:
            fetch(i + 1)
        if i >= buffers:
            store(i - buffers).wait()  # its output buffer, reused now
        multiply(i)
        store(i).start()
    for i in range(max(0, entries - buffers), entries):
        store(i).wait()


def forward_dma(buffers: int, interpret: bool):
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def run(a, b):
        B, M, K = a.shape
        N = b.shape[2]
        kernel = functools.partial(_dma_kernel, entries=B, buffers=buffers)
        any_space = pl.BlockSpec(memory_space=pl.ANY)
        out = pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((M, B, N), a.dtype),
            in_specs=[any_space, any_space],
            out_specs=any_space,
            scratch_shapes=[
                pltpu.VMEM((buffers, M, K), a.dtype),
                pltpu.VMEM((buffers, K, N), a.dtype),
                pltpu.VMEM((buffers, M, N), a.dtype),
                pltpu.SemaphoreType.DMA((3, buffers)),
            ],
            interpret=interpret,
        )(swap(a), swap(b))
        return swap(out)

    return run


def copies(jitted: Any, args: tuple[Any, ...]) -> int:
    text = jitted.lower(*args).compile().as_text()
    return len(re.findall(r"= \S+ copy(?:-start)?\(", text))


def error(got: Any, want: Any) -> float:
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


def subjects(shape, quick: bool, interpret: bool) -> dict[str, tuple[str, Any]]:
    """Each subject's mode (``fwd``: ``(a, b)``, ``bwd``: ``(a, b, g)``) and function."""
    found: dict[str, tuple[str, Any]] = {
        "shipped fwd": ("fwd", matmul_kernel.pallas),
        "xla fwd": ("fwd", jnp.matmul),
        "dma seq fwd": ("fwd", forward_dma(1, interpret)),
    }
    if shape[0] > 1:
        found["dma 2buf fwd"] = ("fwd", forward_dma(2, interpret))
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
    for name, (mode, fn) in subjects(shape, quick, interpret).items():
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
            rows += measure(shape, dtype, repeats, args.quick)
    record = {"provenance": provenance(), "default_layouts": layouts, "rows": rows}
    (args.out / "matmul_batch_middle.json").write_text(json.dumps(record, indent=1) + "\n")
    for row in rows:
        figure = f"{row['us']:8.1f} µs" if "us" in row else "refused"
        print(f"{row['dtype']:9} {row['shape']} {row['subject']:34} {figure}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
