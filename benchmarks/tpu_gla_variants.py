"""GLA forward body variants on a TPU (issue 53): which diagonal-block height and which
off-diagonal layout the chip runs fastest, each checked against the float32 recurrence.

    python benchmarks/tpu_gla_variants.py --out "$OUT"          # on a TPU host, repo root
    python benchmarks/tpu_gla_variants.py --out /tmp/x --quick  # the plumbing, on a CPU

The variants are the shipped body (``kernels.gla.forward_tpu.chunk``) at DIAG = 16 and 8,
and each with its off-diagonal blocks computed for their own rows only (``sliced``: one
[s, C] product per sub-chunk, the rows concatenated) instead of a C x C product whose rows
a mask keeps. Every variant runs through the public ``chunk_gla`` with the module's body
swapped in (jax's caches cleared between variants). Device time per call (the profiler,
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
from kernels.gla.common import F32, dot, iota  # noqa: E402

SHIPPED = forward_tpu.chunk
SHAPES = ((1, 1024, 4, 64, 64), (2, 512, 4, 128, 128), (4, 1024, 8, 128, 128))


def sliced_chunk(refs: dict, st: jax.Array, *, C: int, s: int, scale: float, dtype) -> tuple:
    """The shipped body with its off-diagonal blocks as [s, C] products, one per sub-chunk."""
    q, k, v, g = (refs[n][...] for n in "qkvg")
    query, key, span, place, cum, ref = (refs[n][...] for n in forward_tpu.MASK_NAMES)
    gather = forward_tpu.gather
    b = gather(cum, g)
    b_last = jnp.sum(g.astype(F32), axis=0, keepdims=True)
    qs = q.astype(F32) * scale
    k32 = k.astype(F32)
    qp = gather(query, q) * scale
    kp = gather(key, k)
    decay = jnp.exp(jnp.minimum(gather(span, g), 0.0))
    score = jnp.sum(qp * kp * decay, axis=1, keepdims=True)
    a = gather(place, (score * key.astype(F32)).astype(v.dtype))
    q_r = qs * jnp.exp(b - gather(ref, g))
    row, col = iota((C, g.shape[1]), 0), iota((s, C), 1)
    parts = [jnp.zeros((s, C), F32)]
    for n in range(1, C // s):
        r = jnp.sum(jnp.where(row < n * s, g.astype(F32), 0.0), axis=0, keepdims=True)
        k_r = k32 * jnp.exp(jnp.minimum(r - b, 0.0))
        part = dot(q_r[n * s : (n + 1) * s], k_r, (1, 1), dtype)
        parts.append(jnp.where(col < n * s, part, 0.0))
    a = a + jnp.concatenate(parts, axis=0)
    o = dot(qs * jnp.exp(b), st, (1, 1), dtype) + dot(a, v, (1, 0), dtype)
    from kernels.gla.common import advance_state

    return o, advance_state(st, k32, v, b, b_last, dtype)


def _use(diag: int, body: Any) -> None:
    forward_tpu.DIAG = diag
    forward_tpu.chunk = body
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
        for name, diag, body in (
            ("shipped s16", 16, SHIPPED),
            ("shipped s8", 8, SHIPPED),
            ("sliced s16", 16, sliced_chunk),
            ("sliced s8", 8, sliced_chunk),
        ):
            row: dict[str, Any] = {"case": case.id, "variant": name, "chunk": chunk}
            _use(diag, body)
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
    _use(16, SHIPPED)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quick", action="store_true", help="tiny shapes, on a CPU")
    parser.add_argument("--repeats", type=int, default=10)
    opts = parser.parse_args()
    opts.out.mkdir(parents=True, exist_ok=True)
    shapes = ((1, 64, 1, 16, 16),) if opts.quick else SHAPES
    chunks = (32,) if opts.quick else (64, 128)
    rows = []
    for shape in shapes:
        for dtype in ("float32", "bfloat16"):
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
