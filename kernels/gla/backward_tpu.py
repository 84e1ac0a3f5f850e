"""The GLA backward's chunk body on a TPU (Mosaic): a whole chunk at a time, no loops.

Why a body of its own: the shared body (``backward_chunk.bwd_chunk``) builds each 16x16
diagonal block one position at a time, 16 serial steps of masked row and column sums per
sub-chunk. On a TPU v5e that loop made the backward 10x the forward (B1-T1024-H4-K64 bf16:
524 µs against 52 µs; benchmarks/data/tpu_v5e_kernels_2026-12-06d.txt), as the same loop
once made the forward 519 µs. Here the same exact arithmetic is laid out as the forward's
TPU body lays it out (``forward_tpu``), a few large operations the MXU and the vector unit
take whole:

* **Pairs as rows.** Every causal (query i, key j) pair of an ``s``-row diagonal block is one
  row of a [C·s, K] array, gathered by the forward's 0/1 matrices: q_i, k_j, the decay
  exp(b_i - b_j) <= 1 (summed gates over (j, i], never factored) and dA[i, j]. A pair's
  terms, dA[i, j]·e^(b_i-b_j)·k_j for dq_i and dA[i, j]·e^(b_i-b_j)·q_i for dk_j, are put
  back in their rows by one 0/1 matmul each (``place``, and ``key``'s transpose).
* **Off-diagonal blocks** factor around a reference of b per block, every factor <= 1: for
  dq (keys before block n) r = b just before it, as the forward; for dk (queries after it)
  r = b at its last row. One [s, C] matmul per block and term.
* **dgk's in-chunk reverse cumsum** is one matmul with the transposed ``cum`` mask.

The 0/1 matrices are inputs with a constant block index (``masks``), their products exact
(``forward_tpu.gather``); products of real operands follow ``common.dot`` (the input dtype
on the MXU, float32 at HIGHEST precision). Notation and the gradient formulas:
``kernels.gla.backward_chunk``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from kernels.gla import backward_chunk, forward_tpu
from kernels.gla.common import F32, dot, iota
from kernels.gla.forward_tpu import gather

# Rows per diagonal block: the forward's (8 measured fastest there on a v5e).
DIAG = forward_tpu.DIAG
# The forward's matrices and two transposes the backward scatters with: ``key_t`` [C, C·s]
# puts a pair's term in its key's row, ``cum_t`` [C, C] sums rows t >= i (reverse cumsum).
MASK_NAMES = (*forward_tpu.MASK_NAMES, "key_t", "cum_t")


def masks(C: int, s: int) -> tuple[jax.Array, ...]:
    """The 0/1 matrices of ``MASK_NAMES`` for chunks of C rows, diagonal blocks of s."""
    forward = forward_tpu.masks(C, s)
    named = dict(zip(forward_tpu.MASK_NAMES, forward, strict=True))
    return (*forward, named["key"].T, named["cum"].T)


def _off_diagonal(
    qs: jax.Array, k32: jax.Array, b: jax.Array, g32: jax.Array, da: jax.Array, dat: jax.Array,
    *, s: int, dtype: Any,
) -> tuple[jax.Array, jax.Array, jax.Array]:  # fmt: skip
    """(dq, dk, A) of the blocks off the diagonal, rows stacked block by block.

    Block n holds rows n·s..(n+1)·s. dq: its queries against the keys before it, factored
    around r = b just before it; A likewise (for dv). dk: its keys against the queries after
    it, factored around r = b at its last row. da = dA, dat = dAᵀ ([C, C] each).
    """
    C, K = qs.shape
    row, col = iota((C, K), 0), iota((s, C), 1)
    dq_parts, dk_parts, a_parts = [], [], []
    for n in range(C // s):
        lo, hi = n * s, (n + 1) * s
        if lo:  # keys j < lo: b_i <= r <= b_j
            r = jnp.sum(jnp.where(row < lo, g32, 0.0), axis=0, keepdims=True)
            k_r = k32 * jnp.exp(jnp.minimum(r - b, 0.0))
            q_up = jnp.exp(jnp.minimum(b[lo:hi] - r, 0.0))  # [s, K]
            before = col < lo
            dq_off = dot(jnp.where(before, da[lo:hi], 0.0), k_r, (1, 0), dtype)
            dq_parts.append(q_up * dq_off)
            a_parts.append(jnp.where(before, dot(qs[lo:hi] * q_up, k_r, (1, 1), dtype), 0.0))
        else:
            dq_parts.append(jnp.zeros((s, K), F32))
            a_parts.append(jnp.zeros((s, C), F32))
        if hi < C:  # queries i >= hi: b_i <= r <= b_j
            r = jnp.sum(jnp.where(row < hi, g32, 0.0), axis=0, keepdims=True)
            q_r = qs * jnp.exp(jnp.minimum(b - r, 0.0))
            k_up = jnp.exp(jnp.minimum(r - b[lo:hi], 0.0))  # [s, K]
            dk_off = dot(jnp.where(col >= hi, dat[lo:hi], 0.0), q_r, (1, 0), dtype)
            dk_parts.append(k_up * dk_off)
        else:
            dk_parts.append(jnp.zeros((s, K), F32))
    stack = lambda parts: jnp.concatenate(parts, axis=0)  # noqa: E731
    return stack(dq_parts), stack(dk_parts), stack(a_parts)


def bwd_chunk(
    refs: dict, st: jax.Array, dst: jax.Array, *, C: int, s: int, scale: float, dtype: Any
) -> tuple[dict[str, jax.Array], jax.Array]:
    """({dq, dk, dv, dg} of one chunk, float32 [C, ·]; dS_inᵀ [V, K]).

    ``refs`` holds the chunk's q, k, v, g, do blocks and the ``masks`` by name; st = S_inᵀ
    and dst = dS_outᵀ, both [V, K] float32. dq is w.r.t. the unscaled q.
    """
    q, k, v, g, do = (refs[n][...] for n in ("q", "k", "v", "g", "do"))
    mask = {n: refs[n][...] for n in MASK_NAMES}
    g32 = g.astype(F32)
    qs, k32 = q.astype(F32) * scale, k.astype(F32)
    b = gather(mask["cum"], g)  # [C, K] in-chunk cumulative gates
    b_last = jnp.sum(g32, axis=0, keepdims=True)
    e_last = jnp.exp(b_last)
    e_b = jnp.exp(b)  # <= 1

    # Inter-chunk terms, through S_in and dS_out.
    k_dec = jnp.exp(jnp.minimum(b_last - b, 0.0))  # e^(b_C - b) <= 1
    dq = e_b * dot(do, st, (1, 0), dtype)  # w.r.t. the scaled q
    dk = k_dec * dot(v, dst, (1, 0), dtype)
    carry = backward_chunk.state_carry(st, dst, e_last) + jnp.sum(k32 * dk, axis=0, keepdims=True)
    dv = dot(k32 * k_dec, dst, (1, 1), dtype)

    da = dot(do, v, (1, 1), dtype)  # dA [C, C]
    dat = dot(v, do, (1, 1), dtype)  # dAᵀ

    # Diagonal blocks: every causal pair (i, j) as a row p.
    key32 = mask["key"].astype(F32)  # [C·s, C]: 1 at column j of a causal pair, else 0
    qp = gather(mask["query"], q) * scale
    kp = gather(mask["key"], k)
    decay = jnp.exp(jnp.minimum(gather(mask["span"], g), 0.0))  # e^(b_i - b_j) <= 1
    da_p = jnp.sum(gather(mask["query"], da) * key32, axis=1, keepdims=True)  # dA[i, j]
    w = da_p * decay
    dq = dq + gather(mask["place"], w * kp)
    dk = dk + gather(mask["key_t"], w * qp)
    score = jnp.sum(qp * kp * decay, axis=1, keepdims=True)  # A[i, j]
    a = gather(mask["place"], score * key32)  # [C, C], the diagonal blocks

    dq_off, dk_off, a_off = _off_diagonal(qs, k32, b, g32, da, dat, s=s, dtype=dtype)
    dq, dk, a = dq + dq_off, dk + dk_off, a + a_off
    dv = dv + dot(a, do, (0, 0), dtype)  # Σ_i A[i, j] · do_i

    # dg: the in-chunk reverse cumsum of q ⊙ dq - k ⊙ dk, plus what later chunks add.
    dg = gather(mask["cum_t"], qs * dq - k32 * dk) + carry
    dst_in = dst * e_last + dot(do, qs * e_b, (0, 0), dtype)
    return {"dq": dq * scale, "dk": dk, "dv": dv, "dg": dg}, dst_in
