"""GLA forward body variants on a TPU (issue 53): which diagonal-block height and which
layout of the diagonal blocks' pairs the chip runs fastest, each checked against the float32
recurrence.

    python benchmarks/tpu_gla_variants.py --out "$OUT"          # on a TPU host, repo root
    python benchmarks/tpu_gla_variants.py --out /tmp/x --quick  # the plumbing, on a CPU

The variants are the shipped body (``kernels.gla.forward_tpu.chunk``: its off-diagonal
blocks one [s, C] product per sub-chunk) with its pairs' rows gathered by 0/1 matmuls
("gather", ``forward_tpu.PAIRS``) or repeated and tiled on the vector unit ("broadcast"),
at DIAG = 8 and 16. Its run of 2026-12-06 timed DIAG 16 against 8 ("sliced s16", "sliced
s8") and 0.4.0's body, a masked C x C product per sub-chunk ("shipped" in
benchmarks/data/tpu_v5e_gla_variants_2026-12-06.json), which GLA 0.5.0 replaced. Every
variant runs through the public ``chunk_gla`` with the module's settings swapped in (jax's
caches cleared between variants). Device time per call (the profiler,
``tpu_microbench.device_us``), XLA's chunked formula beside it; each variant's largest
error against the float32 recurrence and whether it is within the SPEC's tolerance.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from tpu_microbench import device_us, provenance  # noqa: E402

from ci_bench.contract.spec import Case  # noqa: E402
from kernels.gla import SPEC, chunk_gla, forward_tpu  # noqa: E402
from kernels.gla.common import F32  # noqa: E402

SHIPPED = (forward_tpu.DIAG, forward_tpu.PAIRS)
VARIANTS = (("gather s8", 8, "gather"), ("broadcast s8", 8, "broadcast"))
VARIANTS += (("broadcast s16", 16, "broadcast"),)
SHAPES = ((1, 1024, 4, 64, 64), (2, 512, 4, 128, 128), (4, 1024, 8, 128, 128))


def _use(diag: int, pairs: str) -> None:
    forward_tpu.DIAG = diag
    forward_tpu.PAIRS = pairs
    jax.clear_caches()


def measure(shape: tuple[int, ...], dtype: str, chunks: tuple[int, ...], repeats: int) -> list:
    B, T, H, K, V = shape
    case = Case("gla", {"B": B, "T": T, "H": H, "K": K, "V": V}, dtype)
    args = SPEC.make_inputs(case, jax.random.PRNGKey(0))
    with jax.default_matmul_precision("highest"):  # on a TPU, DEFAULT is one bf16 pass
        want = jax.jit(SPEC.reference)(*args)
    tol = SPEC.tolerances[dtype]
    rows = [{"case": case.id, "variant": "xla", "chunk": 64}]
    rows[0]["us"] = device_us(SPEC.native, args, repeats)
    for chunk in chunks:
        for name, diag, pairs in VARIANTS:
            row: dict[str, Any] = {"case": case.id, "variant": name, "chunk": chunk}
            _use(diag, pairs)
            fn = lambda *a, c=chunk: chunk_gla(*a, chunk_size=c)  # noqa: E731
            try:
                got = jax.jit(fn)(*args).astype(F32)
                err = jnp.abs(got - want)
                row["max_err"] = float(jnp.max(err))
                row["ok"] = bool(jnp.all(err <= tol.atol + tol.rtol * jnp.abs(want)))
                row["us"] = device_us(fn, args, repeats)
            except Exception as error:  # a variant Mosaic refuses is a finding, not a crash
                row["error"] = f"{type(error).__name__}: {str(error)[:300]}"
            rows.append(row)
            print(json.dumps(row), flush=True)
    _use(*SHIPPED)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quick", action="store_true", help="tiny shapes, on a CPU")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--chunks", default="64,128", help="chunk sizes, comma-separated")
    parser.add_argument("--dtypes", default="float32,bfloat16", help="comma-separated")
    opts = parser.parse_args()
    opts.out.mkdir(parents=True, exist_ok=True)
    shapes = ((1, 64, 1, 16, 16),) if opts.quick else SHAPES
    chunks = (32,) if opts.quick else tuple(int(c) for c in opts.chunks.split(","))
    rows = []
    for shape in shapes:
        for dtype in opts.dtypes.split(","):
            rows += measure(shape, dtype, chunks, 2 if opts.quick else opts.repeats)
            data = {"provenance": provenance(), "rows": rows}
            (opts.out / "gla_variants.json").write_text(json.dumps(data, indent=1))
    for row in rows:
        us = f"{row['us']:9.1f}" if "us" in row else "        –"
        verdict = "ok" if row.get("ok", True) else "TOLERANCE"
        head = f"{row['case']:34} {row['variant']:12} C{row['chunk']:<4}"
        print(f"{head} {us} µs {verdict} {row.get('error', '')[:80]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
