"""What XLA's layout choice costs a Pallas matmul on unaligned batched shapes: chip time.

On a TPU, XLA stores ``f32[4, 513, 513]`` as ``{2,0,1:T(4,128)}`` (the batch axis second
minor: no rows padded from 513 to 520), while a ``pallas_call`` takes its operands row-major
(``{2,1,0}``). Around the project's matmul XLA then copies both operands in and the result
out; its own dot reads the stored layout. This script times, per shape and dtype, the
project's matmul and ``jnp.matmul`` as a caller gets them (the default layouts) and with
every operand and the result stored row-major (``jax.experimental.layout.Format``), and
counts the copies in each compiled program: the kernel's own time, the copies' cost, and
whether the comparison the ci profile makes charges the kernel for XLA's layout.

Run from the repository's root on a TPU host (device time from the profiler, as
tpu_microbench.py):

    python benchmarks/tpu_matmul_layouts.py --out "$OUT"
    python benchmarks/tpu_matmul_layouts.py --out /tmp/layouts --quick   # plumbing, on a CPU

Writes ``matmul_layouts.json`` and prints a table.
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
from jax.experimental.layout import Format, Layout

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from tpu_microbench import jitted_device_us, provenance  # noqa: E402

from kernels.matmul.kernel import BlockSizes, matmul_tiled  # noqa: E402

# (B, M, K, N): the ci profile's unaligned batched case, its B1 form, and an aligned control.
SHAPES = ((4, 513, 513, 513), (1, 513, 513, 513), (4, 512, 512, 512))
TILES = BlockSizes(640, 640, 640)  # one whole block per dimension, one batch entry a step


def copies_and_layout(jitted: Any, args: tuple[Any, ...]) -> tuple[int, str]:
    """The copy instructions of the compiled program, and its first parameter's layout."""
    text = jitted.lower(*args).compile().as_text()
    entry = text[text.find("ENTRY") :]
    copies = len(re.findall(r"= \S+ copy(?:-start)?\(", text))
    found = re.search(r"(\{[0-9,]+(?::[^{}\s]*)?\}) parameter\(0\)", entry)
    return copies, found.group(1) if found else "?"


def measure(shape: tuple[int, int, int, int], dtype: Any, repeats: int, interpret: bool):
    B, M, K, N = shape
    keys = jax.random.split(jax.random.PRNGKey(0))
    a = jax.random.normal(keys[0], (B, M, K), jnp.float32).astype(dtype)
    b = (jax.random.normal(keys[1], (B, K, N), jnp.float32) * K**-0.5).astype(dtype)
    subjects = {
        "pallas": lambda x, y: matmul_tiled(x, y, block_sizes=TILES, interpret=interpret),
        "xla": jnp.matmul,
    }
    device = jax.devices()[0]
    row_major = Format(Layout(major_to_minor=(0, 1, 2)), jax.sharding.SingleDeviceSharding(device))
    rows = []
    for name, fn in subjects.items():
        for layouts in ("default", "row-major"):
            if layouts == "default":
                jitted, args = jax.jit(fn), (a, b)
            else:
                jitted = jax.jit(fn, in_shardings=(row_major, row_major), out_shardings=row_major)
                args = (jax.device_put(a, row_major), jax.device_put(b, row_major))
            copies, layout = copies_and_layout(jitted, args)
            us = jitted_device_us(jitted, args, repeats)
            rows.append(
                {
                    "shape": list(shape),
                    "dtype": jnp.dtype(dtype).name,
                    "subject": name,
                    "layouts": layouts,
                    "operand_layout": layout,
                    "copies": copies,
                    "us": us,
                }
            )
            print(
                f"{shape} {jnp.dtype(dtype).name:9s} {name:7s} {layouts:10s} "
                f"{layout:28s} copies {copies}  {us:8.2f} µs",
                flush=True,
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="one small shape (a CPU check)")
    opts = parser.parse_args()
    interpret = jax.default_backend() == "cpu"
    shapes = ((2, 33, 40, 17),) if opts.quick else SHAPES
    rows: list[dict[str, Any]] = []
    for shape in shapes:
        for dtype in (jnp.float32, jnp.bfloat16):
            rows += measure(shape, dtype, 3 if opts.quick else opts.repeats, interpret)
    opts.out.mkdir(parents=True, exist_ok=True)
    doc = {"provenance": provenance(), "tiles": list(vars(TILES).values()), "rows": rows}
    (opts.out / "matmul_layouts.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
