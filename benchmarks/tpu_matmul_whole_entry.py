"""Row-major batched matmuls with each batch entry whole in VMEM, by DMA: chip time (issue 53).

matmul 0.11.0's backward at B16-1024³ float32 runs 1.25-1.26x XLA's on a TPU v5e (590 against
469 µs): its fused tiled call, one (1024, 1024, 1024) block a product, reads the next entry's
three blocks while dB multiplies and writes dA and dB while the next dA multiplies, 569 GB/s
against XLA's 716. The DMA kernel of ``kernels.matmul.entrywise`` keeps every read and write
of an entry in flight at once beside the multiply; it serves arrays stored batch-middle, and
``batch_middle=False`` reads row-major ones, each entry one contiguous copy. This script
times it (``buffers`` entries in VMEM) beside the shipped subject (the tuned tiles of
``kernels.matmul.pallas``) and XLA's ``jnp.matmul`` and its VJP: forward, backward, and both
in one program (ci-bench's forward+backward), each output's largest error against ``jnp.matmul``
at HIGHEST recorded beside its time.

Run from the repository's root on a TPU host (device time from the profiler):

    python benchmarks/tpu_matmul_whole_entry.py --out "$OUT" [--sizes 1024,128]
    python benchmarks/tpu_matmul_whole_entry.py --out /tmp/whole --quick   # on a CPU

Writes ``matmul_whole_entry.json`` and prints a table.
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

import kernels.matmul as matmul  # noqa: E402
from kernels.matmul import entrywise  # noqa: E402

SHAPES = tuple(
    (batch, size, dtype)
    for size in (1024, 128)
    for dtype in ("float32", "bfloat16")
    for batch in (4, 16)
)
# Entries in VMEM at once: a third hides more of a large entry's copies, four small ones'
DEPTHS = {1024: (2, 3), 128: (2, 4)}
LIMIT = 100 << 20  # within a v5e's 128 MiB; every subject here compiled under it there


def both(fn: Any) -> Any:
    """Forward and the pullback of its output in one program (ci-bench's forward+backward)."""

    def step(a: jax.Array, b: jax.Array, g: jax.Array) -> list[jax.Array]:
        out, pull = jax.vjp(fn, a, b)
        return [out, *pull(g)]

    return step


def subjects(interpret: bool, depths: tuple[int, ...]) -> dict[str, tuple[str, Any]]:
    """Each subject's mode (``fwd``: ``(a, b)``, ``bwd``, ``f+b``: ``(a, b, g)``) and
    function."""
    out: dict[str, tuple[str, Any]] = {
        "xla fwd": ("fwd", jnp.matmul),
        "xla bwd": ("bwd", lambda a, b, g: jax.vjp(jnp.matmul, a, b)[1](g)),
        "xla f+b": ("f+b", both(jnp.matmul)),
        "shipped fwd": ("fwd", matmul.pallas),
        "shipped bwd": ("bwd", lambda a, b, g: jax.vjp(matmul.pallas, a, b)[1](g)),
        "shipped f+b": ("f+b", both(matmul.pallas)),
    }
    options = {"interpret": interpret, "vmem_limit": LIMIT, "batch_middle": False}
    for depth in depths:
        out[f"entry fwd x{depth}"] = (
            "fwd",
            lambda a, b, d=depth: entrywise.entrywise_matmul(a, b, buffers=d, **options),
        )
        out[f"entry bwd x{depth}"] = (
            "bwd",
            lambda a, b, g, d=depth: entrywise.entrywise_backward(a, b, g, buffers=d, **options),
        )
        out[f"entry f+b x{depth}"] = ("f+b", _entry_both(depth, options))
    return out


def _entry_both(depth: int, options: dict[str, Any]) -> Any:
    """The DMA forward and backward, one after the other as a custom_vjp's would run."""

    def step(a: jax.Array, b: jax.Array, g: jax.Array) -> list[jax.Array]:
        out = entrywise.entrywise_matmul(a, b, buffers=depth, **options)
        return [out, *entrywise.entrywise_backward(a, b, g, buffers=depth, **options)]

    return step


def measure(batch: int, size: int, dtype: str, repeats: int) -> list[dict[str, Any]]:
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    a = jax.random.normal(keys[0], (batch, size, size), dtype)
    b = (jax.random.normal(keys[1], (batch, size, size), jnp.float32) * size**-0.5).astype(dtype)
    g = (jax.random.normal(keys[2], (batch, size, size), jnp.float32) * size**-0.5).astype(dtype)
    hi = jax.lax.Precision.HIGHEST
    want = {
        "fwd": [jnp.matmul(a, b, precision=hi, preferred_element_type=jnp.float32)],
        "bwd": [
            jnp.matmul(g, swap_last(b), precision=hi, preferred_element_type=jnp.float32),
            jnp.matmul(swap_last(a), g, precision=hi, preferred_element_type=jnp.float32),
        ],
    }
    want["f+b"] = want["fwd"] + want["bwd"]
    rows = []
    for name, (mode, fn) in subjects(
        jax.default_backend() == "cpu", DEPTHS.get(size, (2,))
    ).items():
        args = (a, b) if mode == "fwd" else (a, b, g)
        jitted = jax.jit(fn)
        try:
            got = jitted(*args)
            got = [got] if mode == "fwd" else list(got)
            assert len(got) == len(want[mode]), (name, len(got))
            row = {"max_rel_error": max(map(error, got, want[mode]))}
            row["us"] = jitted_device_us(jitted, args, repeats)
        except Exception as exc:  # a depth past the chip's VMEM: say so, go on
            row = {"error": " ".join(str(exc).split())[:300]}
        rows.append({"shape": [batch, size, size, size], "dtype": dtype, "subject": name, **row})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--sizes", default="1024,128", help="comma-separated: 1024, 128")
    parser.add_argument("--quick", action="store_true", help="one small shape, few repeats")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sizes = {int(size) for size in args.sizes.split(",")}
    shapes = [s for s in SHAPES if s[1] in sizes]
    if args.quick:
        shapes = [(3, 128, "float32"), (2, 128, "bfloat16")]
    rows = []
    for batch, size, dtype in shapes:
        rows += measure(batch, size, dtype, 3 if args.quick else args.repeats)
        record = {"provenance": provenance(), "rows": rows}
        (args.out / "matmul_whole_entry.json").write_text(json.dumps(record, indent=1) + "\n")
    for row in rows:
        figure = f"{row['us']:8.1f} µs" if "us" in row else "refused"
        print(f"{row['shape']} {row['dtype']:8} {row['subject']:14} {figure}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
