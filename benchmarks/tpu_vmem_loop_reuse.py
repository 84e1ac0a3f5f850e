"""How much scoped VMEM an unrolled loop's values take inside a Pallas TPU kernel.

The cost model counts the values an unrolled loop computes (a flash kernel's f32 scores
``[bq, bk]`` and what is made from them) once per copy of the body. No need measured so far
is above that count, but jax's splash attention compiles below it at some tilings: the
backend reuses a dead copy's VMEM for the next one. That reuse is decided by libtpu's
scheduler and register allocator after Mosaic, not by the kernel: no VMEM allocation for
these values appears in Mosaic's MLIR, and the same loop structure reuses more or less with
its sizes. This microbenchmark measures it on kernels of our own:

* whole-array kernels (no grid), f32 scores ``[bm, bn]`` per copy, ``u`` copies whose
  values are dead at the end of each copy, carried to the next through a scratch ref (a
  running max), or live until after the loop;
* a flash-shaped kernel (grid, online softmax through m/l/acc scratch refs, the block's
  ``bk_major`` keys in ``bk_major // bk`` unrolled copies) with flash's accumulator (kept
  normalised, bf16 probabilities) and splash's (``acc = alpha * acc + p @ v``, f32
  probabilities), beside jax's own flash attention at the same tilings as a cross-check.

Each is compiled by libtpu for a v5e with ``vmem_limit_bytes`` raised in 1/16 MiB steps
from its blocks and scratch until it compiles; the refusals' "Scoped allocation with size"
words give the steps and the need (the smallest limit it compiles at), and ``beyond`` is the
need less the blocks (double-buffered under a grid) and scratch. Nothing runs: a host with
libtpu installed compiles deviceless (``tpu_deviceless.py``). Found: dead copies share one
copy's room, live ones each take theirs; our flash-style kernel needs what jax's flash does
at every tiling, and the splash-style one less at some (5.31 against 7.0 MiB at 1024/1024/256).

    ALLOW_MULTIPLE_LIBTPU_LOAD=1 python benchmarks/tpu_vmem_loop_reuse.py --out OUT

Its run of 2026-12-07 (deviceless v5e, libtpu 0.0.42.1):
benchmarks/data/tpu_v5e_vmem_loop_reuse_deviceless_2026-12-07.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

MIB = 1 << 20
D = 128  # head dimension / lane width
SEQ = 4096  # the flash-shaped kernels' sequence length
NT = (((1,), (1,)), ((), ()))  # q @ k.T
MICRO = [(pattern, u) for pattern in ("dead", "carried", "live") for u in (1, 2, 4)]
FLASH_POINTS = [  # (bq, bk_major, bk)
    (2048, 512, 512),
    (2048, 1024, 512),
    (2048, 2048, 512),
    (2048, 2048, 1024),
    (2048, 2048, 2048),
    (1024, 1024, 1024),
    (1024, 1024, 512),
    (1024, 1024, 256),
    (1024, 1024, 128),
]


def scoped_need(make: Callable[[int], Callable], args: tuple, held_mib: float) -> dict:
    """The smallest limit (1/16 MiB steps) ``make(limit)`` compiles at for ``args``, and the
    sizes each refusal named (``tpu_vmem_probe.search_need``). The search starts at the
    blocks + scratch the call holds (each compile takes seconds; below them it refuses,
    naming them; a call that compiles at once, no refusal, needs at most that). jax's caches
    are cleared before each compile: a jitted library kernel (jax's flash attention)
    otherwise keeps its first trace, and so its first limit."""
    import jax
    from tpu_vmem_probe import compile_message, search_need

    def compiles_at(limit: int) -> str | None:
        jax.clear_caches()
        return compile_message(make(limit), list(args), None)

    step = MIB // 16
    start = int(held_mib * MIB) // step * step
    found = search_need(compiles_at, 1 / 16, start=start, check_below=False)
    row = {"refusals_mib": found["named_mib"]}
    if "compiles_at_mib" in found:
        return {"need_mib": found["compiles_at_mib"]} | row | {"from_mib": start / MIB}
    return {"error": found.get("message", "no limit found in 16 tries")[-400:]} | row


def micro_copy(pattern: str, bn: int, i: int, refs: tuple, keep: list) -> None:
    """Copy ``i`` of the loop: scores of q against keys ``[i * bn, (i + 1) * bn)``."""
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl

    q_ref, k_ref, o_ref, m_ref = refs
    k = k_ref[pl.ds(i * bn, bn), :]
    s = lax.dot_general(q_ref[...], k, NT, preferred_element_type=jnp.float32)
    m = s.max(axis=1, keepdims=True)
    if pattern == "carried":  # a running max through the scratch ref
        m = jnp.maximum(m_ref[...], m)
        m_ref[...] = m
        m = jnp.tile(m, (1, bn // 128))
    p = jnp.exp(s - m)
    if pattern == "live":
        keep.append(p)
    else:
        o_ref[...] += jnp.dot(p.astype(k.dtype), k, preferred_element_type=jnp.float32)


def micro_kernel(pattern: str, u: int, bn: int) -> Callable:
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(q_ref, k_ref, o_ref, *scratch):
        m_ref = scratch[0] if scratch else None
        o_ref[...] = jnp.zeros_like(o_ref)
        if m_ref is not None:
            m_ref[...] = jnp.full_like(m_ref, -1e30)
        keep: list = []
        for i in range(u):
            micro_copy(pattern, bn, i, (q_ref, k_ref, o_ref, m_ref), keep)
        for i, p in enumerate(keep):  # the live pattern's values, used after the loop
            k = k_ref[pl.ds(i * bn, bn), :]
            o_ref[...] += jnp.dot(p.astype(k.dtype), k, preferred_element_type=jnp.float32)

    return kernel


def micro_row(pattern: str, u: int, bm: int, bn: int, where: Any) -> dict:
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    scratch = [pltpu.VMEM((bm, 128), jnp.float32)] if pattern == "carried" else []

    def make(limit: int) -> Callable:
        return pl.pallas_call(
            micro_kernel(pattern, u, bn),
            out_shape=jax.ShapeDtypeStruct((bm, D), jnp.float32),
            scratch_shapes=scratch,
            compiler_params=pltpu.CompilerParams(vmem_limit_bytes=limit),
        )

    q = jax.ShapeDtypeStruct((bm, D), jnp.bfloat16, sharding=where)
    k = jax.ShapeDtypeStruct((u * bn, D), jnp.bfloat16, sharding=where)
    held = (bm * D * 2 + u * bn * D * 2 + bm * D * 4 + len(scratch) * bm * 128 * 4) / MIB
    row = {"kernel": "micro, no grid", "pattern": pattern, "bm": bm, "bn": bn, "copies": u}
    row |= {"scores_mib_per_copy": bm * bn * 4 / MIB}
    return row | with_beyond(scoped_need(make, (q, k), held), held)


def with_beyond(need: dict, held_mib: float) -> dict:
    """``need`` with the blocks + scratch it holds and what it needs beyond them."""
    beyond = round(need["need_mib"] - held_mib, 4) if "need_mib" in need else None
    return {"blocks_scratch_mib": round(held_mib, 4), "beyond_mib": beyond} | need


def flash_copy(style: str, bk: int, i: Any, refs: tuple) -> None:
    """Copy ``i`` of the key loop: one online-softmax step over keys ``[i * bk, (i+1) * bk)``."""
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl

    q_ref, k_ref, v_ref, m_ref, l_ref, acc_ref = refs
    keys = pl.ds(i * bk, bk)
    m_prev, l_prev = m_ref[...], l_ref[...]
    s = lax.dot_general(q_ref[...], k_ref[keys, :], NT, preferred_element_type=jnp.float32)
    if style == "flash":
        s *= 0.1
    m_next = jnp.maximum(m_prev, jnp.max(s, axis=1)[:, None])
    p = jnp.exp(s - jnp.tile(m_next, (1, bk // 128)))
    alpha = jnp.exp(m_prev - m_next)
    l_corr = alpha * l_prev
    l_next = jnp.sum(p, axis=1)[:, None] + l_corr
    l_ref[...], m_ref[...] = l_next, m_next
    v = v_ref[keys, :]
    if style == "flash":  # bf16 probabilities, the accumulator kept normalised
        o = jnp.dot(p.astype(v.dtype), v, preferred_element_type=jnp.float32)
        inv = jnp.where(l_next == 0.0, 1.0, 1.0 / l_next)
        acc_ref[...] *= l_corr * inv
        acc_ref[...] += o * inv
    else:  # splash: f32 probabilities, acc = alpha * acc + p @ v
        o = jnp.dot(p, v.astype(jnp.float32), preferred_element_type=jnp.float32)
        acc_ref[...] = alpha * acc_ref[...] + o


def flash_kernel(style: str, bk_major: int, bk: int) -> Callable:
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl

    def kernel(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref):
        j = pl.program_id(1)
        refs = (q_ref, k_ref, v_ref, m_ref, l_ref, acc_ref)

        @pl.when(j == 0)
        def _():
            m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
            l_ref[...] = jnp.zeros_like(l_ref)
            acc_ref[...] = jnp.zeros_like(acc_ref)

        def body(i, carry):
            flash_copy(style, bk, i, refs)
            return carry

        lax.fori_loop(0, bk_major // bk, body, None, unroll=True)

        @pl.when(j == pl.num_programs(1) - 1)
        def _():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    return kernel


def flash_call(style: str, point: tuple[int, int, int], limit: int) -> Callable:
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    bq, bk_major, bk = point
    rows, keys = (
        pl.BlockSpec((bq, D), lambda i, j: (i, 0)),
        pl.BlockSpec((bk_major, D), lambda i, j: (j, 0)),
    )
    return pl.pallas_call(
        flash_kernel(style, bk_major, bk),
        grid=(SEQ // bq, SEQ // bk_major),
        in_specs=[rows, keys, keys],
        out_specs=rows,
        out_shape=jax.ShapeDtypeStruct((SEQ, D), jnp.bfloat16),
        scratch_shapes=[pltpu.VMEM((bq, 128), jnp.float32)] * 2
        + [pltpu.VMEM((bq, D), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            vmem_limit_bytes=limit, dimension_semantics=("parallel", "arbitrary")
        ),
    )


def jax_flash(point: tuple[int, int, int], limit: int) -> Callable:
    """jax's flash attention (as installed) with its calls' ``vmem_limit_bytes`` set to
    ``limit``: it takes no limit, so its ``CompilerParams`` is patched while it traces."""
    from unittest import mock

    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    bq, bk_major, bk = point
    sizes = fa.BlockSizes(block_q=bq, block_k_major=bk_major, block_k=bk, block_b=1)
    params = fa.pltpu.CompilerParams

    def limited(**kw: Any) -> Any:
        return params(**(kw | {"vmem_limit_bytes": limit}))

    def fn(q: Any, k: Any, v: Any) -> Any:
        with mock.patch.object(fa.pltpu, "CompilerParams", limited):
            return fa.flash_attention(q, k, v, sm_scale=D**-0.5, block_sizes=sizes)

    return fn


def flash_row(kernel: str, point: tuple[int, int, int], where: Any) -> dict:
    import jax
    import jax.numpy as jnp

    bq, bk_major, bk = point
    if kernel == "jax flash_attention":
        shape, make = (1, 8, SEQ, D), lambda limit: jax_flash(point, limit)
    else:
        style = kernel.split()[1].split("-")[0]
        shape, make = (SEQ, D), lambda limit: flash_call(style, point, limit)
    a = jax.ShapeDtypeStruct(shape, jnp.bfloat16, sharding=where)
    held = (2 * (2 * bq * D * 2 + 2 * bk_major * D * 2) + 2 * bq * 128 * 4 + bq * D * 4) / MIB
    row = {"kernel": kernel, "bq": bq, "bk_major": bk_major, "bk": bk, "copies": bk_major // bk}
    row |= {"scores_mib_per_copy": bq * bk * 4 / MIB}
    return row | with_beyond(scoped_need(make, (a, a, a), held), held)


def measured(where: Any) -> list[dict]:
    rows = []
    for pattern, u in MICRO:
        rows.append(timed(lambda p=pattern, u=u: micro_row(p, u, 2048, 512, where)))
    for point in FLASH_POINTS:
        for kernel in ("ours flash-style", "ours splash-style", "jax flash_attention"):
            rows.append(timed(lambda k=kernel, p=point: flash_row(k, p, where)))
    return rows


def timed(measure: Callable[[], dict]) -> dict:
    start = time.monotonic()
    row = measure() | {"seconds": round(time.monotonic() - start, 1)}
    print(json.dumps(row), flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--chip", default="v5e")
    opts = parser.parse_args()
    from tpu_deviceless import target
    from tpu_microbench import provenance

    rows = measured(target(opts.chip))
    opts.out.mkdir(parents=True, exist_ok=True)
    import importlib.metadata

    import jax

    made = {"script": "benchmarks/tpu_vmem_loop_reuse.py", "deviceless": opts.chip}
    made |= {"libtpu": importlib.metadata.version("libtpu"), "jax_flash_attention": jax.__version__}
    data = {"provenance": provenance() | made, "rows": rows}
    (opts.out / "vmem_loop_reuse.json").write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
