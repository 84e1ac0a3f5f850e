"""The per-chunk arithmetic of the GLA backward, shared by its TPU and GPU kernels.

Notation as in ``kernels.gla.kernel``: per chunk b = in-chunk cumsum(gk) (non-increasing),
S_in the state entering the chunk, dS_out the gradient of the state leaving it, the scale
folded into q. Per chunk:

  dq = e^b ⊙ (do·S_inᵀ) + intra,          dk = e^(b_C-b) ⊙ (v·dS_outᵀ) + intra,
  dv = (k ⊙ e^(b_C-b))·dS_out + intra,     dS_in = e^(b_C) ⊙ dS_out + (q ⊙ e^b)ᵀ·do.

The intra-chunk terms use dA = do·vᵀ and the gated scores A with the forward's secondary
chunking: 16-row sub-chunks; keys before a sub-chunk factored around b just before it,
queries after it around b at its last row, the diagonal 16×16 block pairwise. Every exponent
is <= 0, so strong decay underflows to ~0 instead of giving inf/NaN.

The gate gradient (as FLA's ``chunk_gla_bwd_kernel_inter``): with D = q ⊙ dq - k ⊙ dk per
row, dg_i = Σ_{t >= i in the chunk} D_t + Σ_v (S_out ⊙ dS_out), the second term being all
that later chunks contribute. A cumsum does not lower in Mosaic, so the in-chunk reverse
cumsum is a 0/1 upper-triangular float32 matmul per sub-chunk plus a running row sum; and
since S_out = e^(b_C) S_in + Σ_t (k_t e^(b_C-b_t))ᵀ v_t, the carry is
Σ_v e^(b_C) S_in ⊙ dS_out + Σ_t k_t ⊙ dk_inter_t: local to the chunk, with no
cancellation-prone sum over the whole sequence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from kernels.gla.common import F32, Load, advance_state, cumsum_rows, dot, iota
from kernels.gla.cost import SUB_CHUNK

Store = Callable[[str, int, int, jax.Array], None]


def states_chunk(load: Load, st: jax.Array, *, C: int, dtype: Any) -> jax.Array:
    """Sᵀ after one chunk, exactly as the forward computes it."""
    g = load("g", 0, C).astype(F32)
    k = load("k", 0, C).astype(F32)
    b = cumsum_rows(g, 0, C)
    b_last = jnp.sum(g, axis=0, keepdims=True)
    return advance_state(st, k, load("v", 0, C), b, b_last, dtype)


def state_carry(st: jax.Array, dst: jax.Array, e_last: jax.Array) -> jax.Array:
    """Σ_v e^(b_C) S_in ⊙ dS_out [1, K]: the entering state's share of what the later
    chunks add to every dgk row of this chunk (the keys' share is Σ_t k_t ⊙ dk_inter_t)."""
    return jnp.sum(st * e_last * dst, axis=0, keepdims=True)


def _diagonal(
    q_n: jax.Array, k_n: jax.Array, b_n: jax.Array, da: jax.Array, dat: jax.Array, lo: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The diagonal 16×16 block of sub-chunk rows lo..lo+s, one position m at a time.

    da[i, c] = dA[lo+i, c] and dat[j, c] = dA[c, lo+j]. Returns dq and dk of the block's
    rows ([s, K] each) and at [s, C] with at[j, lo+m] = A[lo+m, lo+j] (for dv = Aᵀ·do).
    """
    s, K = q_n.shape
    C = da.shape[1]
    row, col = iota((s, 1), 0), iota((s, C), 1)

    def position(m: jax.Array, acc: tuple) -> tuple:
        dq, dk, at = acc
        pick = row == m
        k_m = jnp.sum(jnp.where(pick, k_n, 0.0), axis=0, keepdims=True)  # [1, K]
        q_m = jnp.sum(jnp.where(pick, q_n, 0.0), axis=0, keepdims=True)
        b_m = jnp.sum(jnp.where(pick, b_n, 0.0), axis=0, keepdims=True)
        # key m, queries i >= m: dq_i += dA[i, m] · k_m ⊙ e^(b_i - b_m)
        e_q = jnp.where(row >= m, jnp.exp(jnp.minimum(b_n - b_m, 0.0)), 0.0)  # [s, K]
        da_m = jnp.sum(jnp.where(col == lo + m, da, 0.0), axis=1, keepdims=True)  # [s, 1]
        dq = dq + da_m * k_m * e_q
        # query m, keys j <= m: dk_j += dA[m, j] · q_m ⊙ e^(b_m - b_j); A[m, j] likewise
        qe = q_m * jnp.where(row <= m, jnp.exp(jnp.minimum(b_m - b_n, 0.0)), 0.0)  # [s, K]
        dat_m = jnp.sum(jnp.where(col == lo + m, dat, 0.0), axis=1, keepdims=True)
        dk = dk + dat_m * qe
        a_m = jnp.sum(k_n * qe, axis=1, keepdims=True)  # [s, 1]
        at = at + jnp.where(col == lo + m, a_m, 0.0)
        return dq, dk, at

    zeros = jnp.zeros((s, K), F32)
    return lax.fori_loop(0, s, position, (zeros, zeros, jnp.zeros((s, C), F32)))


def bwd_chunk(
    load: Load, store: Store, st: jax.Array, dst: jax.Array, *, C: int, scale: float, dtype: Any
) -> jax.Array:
    """dq, dk, dv, dg of one chunk via ``store``; returns dS_inᵀ ([V, K]).

    st = S_inᵀ and dst = dS_outᵀ, both [V, K] float32.
    """
    s = SUB_CHUNK
    g = load("g", 0, C).astype(F32)  # [C, K]
    q = load("q", 0, C).astype(F32) * scale
    k = load("k", 0, C).astype(F32)
    v, do = load("v", 0, C), load("do", 0, C)  # [C, V], matmul operands in the input dtype
    b = cumsum_rows(g, 0, C)
    b_last = jnp.sum(g, axis=0, keepdims=True)  # [1, K]
    e_last = jnp.exp(b_last)
    row_c = iota((C, g.shape[1]), 0)
    col = iota((s, C), 1)
    carry = state_carry(st, dst, e_last)
    d_rows = []

    for lo in range(0, C, s):  # sub-chunks, unrolled (C // s is small)
        hi = lo + s
        q_n = load("q", lo, s).astype(F32) * scale  # [s, K]
        k_n = load("k", lo, s).astype(F32)
        v_n, do_n = load("v", lo, s), load("do", lo, s)
        b_n = cumsum_rows(g, lo, s)

        # Inter-chunk terms, through S_in and dS_out; e^b <= 1, e^(b_C - b) <= 1.
        dq = jnp.exp(b_n) * dot(do_n, st, (1, 0), dtype)  # [s, K], w.r.t. the scaled q
        k_dec = jnp.exp(jnp.minimum(b_last - b_n, 0.0))
        dk = k_dec * dot(v_n, dst, (1, 0), dtype)
        carry = carry + jnp.sum(k_n * dk, axis=0, keepdims=True)  # Σ_t k_t ⊙ dk_inter_t
        dv = dot(k_n * k_dec, dst, (1, 1), dtype)  # [s, V]

        da = dot(do_n, v, (1, 1), dtype)  # [s, C]: dA rows of this sub-chunk
        dat = dot(v_n, do, (1, 1), dtype)  # [s, C]: dA columns of this sub-chunk, transposed
        dq_d, dk_d, at = _diagonal(q_n, k_n, b_n, da, dat, lo)
        dq, dk = dq + dq_d, dk + dk_d

        if lo:  # keys before the sub-chunk, factored around r = b[lo - 1]: b_n <= r <= b_j
            r = jnp.sum(jnp.where(row_c < lo, g, 0.0), axis=0, keepdims=True)
            k_r = k * jnp.exp(jnp.minimum(r - b, 0.0))  # [C, K]
            dq_off = dot(jnp.where(col < lo, da, 0.0), k_r, (1, 0), dtype)
            dq = dq + jnp.exp(jnp.minimum(b_n - r, 0.0)) * dq_off
        if hi < C:  # queries after the sub-chunk, factored around r = b[hi - 1]: b_i <= r <= b_n
            r = jnp.sum(jnp.where(row_c < hi, g, 0.0), axis=0, keepdims=True)
            q_r = q * jnp.exp(jnp.minimum(b - r, 0.0))  # [C, K]
            k_up = jnp.exp(jnp.minimum(r - b_n, 0.0))  # [s, K]
            later = col >= hi
            at = at + jnp.where(later, dot(k_n * k_up, q_r, (1, 1), dtype), 0.0)
            dk = dk + k_up * dot(jnp.where(later, dat, 0.0), q_r, (1, 0), dtype)
        dv = dv + dot(at, do, (1, 0), dtype)  # Σ_i A[i, j] · do_i

        store("dq", lo, s, dq * scale)
        store("dk", lo, s, dk)
        store("dv", lo, s, dv)
        d_rows.append(q_n * dq - k_n * dk)

    # dg: in-chunk reverse cumsum of D (upper-triangular matmul per sub-chunk) + the carry.
    triu = jnp.where(iota((s, s), 1) >= iota((s, s), 0), 1.0, 0.0).astype(F32)
    tail = carry
    for lo, d in reversed(list(zip(range(0, C, s), d_rows, strict=True))):
        store("dg", lo, s, dot(triu, d, (1, 0), F32) + tail)
        tail = tail + jnp.sum(d, axis=0, keepdims=True)

    return dst * e_last + dot(do, q * jnp.exp(b), (0, 0), dtype)
