"""The GLA forward's chunk body on a TPU (Mosaic): a whole chunk at a time, no loops.

Why a body of its own: the shared body (``kernel._chunk``) builds each 16x16 diagonal block
one key column at a time, 64 serial steps per 64-token chunk. On a TPU v5e that loop was
the kernel (519 µs against 85 µs for XLA's chunked formula, B1-T1024-H4-K64 bf16; MXU 2.6 %,
56 vector spills: benchmarks/data/tpu_v5e_profile_2026-12-06.txt). Here the same exact
arithmetic is laid out as a few large operations the MXU and the vector unit take whole:

* **Pairs as rows.** Every (query i, key j) pair of a diagonal block of ``s`` rows is one
  row of a [C·s, K] array: the query row (each row of q repeated s times), the key row (each
  block of k tiled s times) and Σ g over (j, i] = c_i - c_j, c the gates summed within the
  row's own block (so the decay exp(b_i - b_j) is computed pairwise, never factored, and is
  <= 1 for any gates; c_i - c_j subtracts sums of at most s terms, not the chunk's). Their
  product summed over K is the block's score; one 0/1 matmul puts the C·s scores in their
  places of the C x C score matrix. Until 0.6.0 the three rows were gathered by 0/1 matmuls
  (``PAIRS = "gather"``, kept for benchmarks/tpu_gla_variants.py): most of the MXU's work,
  three bfloat16 passes each in float32. Repeated and tiled on the vector unit instead
  (0.7.0), a TPU v5e ran float32 B4-T1024-H8-K128 in 777 µs instead of 1238 and bfloat16
  in 329 instead of 418 (benchmarks/data/tpu_v5e_gla_variants_2026-12-07.json).
* **Off-diagonal blocks** factor around each sub-chunk's reference r (b just before it) as
  the shared body does, exp(b_i - r) <= 1 and exp(r - b_j) <= 1: one [s, C] matmul per
  sub-chunk (its own rows of q only), the rows concatenated.
* The 0/1 matrices are inputs with a constant block index (copied to VMEM once per core).
  A product with one is exact: one MXU pass for bfloat16 operands, three bfloat16 pieces
  for float32 ones (``gather``); the products of real operands are the shared body's
  (bfloat16 on the MXU, float32 at HIGHEST precision).

Rows per diagonal block (``DIAG``) are 8 since 0.5.0: the pairwise work halves, and the
off-diagonal products, one per sub-chunk, stay small. On a TPU v5e this and the [s, C]
off-diagonal products took B1-T1024-H4-K64 from 219 to 146 µs in float32 and 71 to 52 µs in
bfloat16 (benchmarks/tpu_gla_variants.py,
benchmarks/data/tpu_v5e_gla_variants_2026-12-06.json); with the pairs broadcast, 8 rows
still beat 16 (91 against 100 µs, 43 against 45).

Numerically it is the shared body's algorithm (float32 accumulation, the input dtype on the
MXU); only bfloat16 rounding of the diagonal scores moves, which the score matrix gets
before its product with v anyway.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from kernels.gla.common import F32, advance_state, dot, iota

# Rows per diagonal block: the pairwise work is C·s·K per chunk (vector work since 0.7.0),
# the factored one C·s·K per sub-chunk, C/s of them: 8 measured fastest on v5e.
DIAG = 8
# The 0/1 matrices, in the order ``masks`` makes them and the kernel takes them.
MASK_NAMES = ("query", "key", "span", "place", "cum", "ref")
# How a pair row's query, key and decay are laid out: "gather" by the 0/1 matmuls (one MXU
# pass each in bfloat16, three in float32), or "broadcast" (rows repeated and blocks tiled
# on the vector unit; the decay from block-local cumulative gates, c_i - c_j).
PAIRS = "broadcast"  # since 0.7.0


def masks(C: int, s: int) -> tuple[jax.Array, ...]:
    """The constant 0/1 matrices of a chunk of C rows cut into blocks of s:

    ``query`` [C·s, C] picks row i for pair p = i·s + jj; ``key`` [C·s, C] picks the key row
    j = (i // s)·s + jj, zero for jj > i % s (not causal); ``span`` [C·s, C] sums the gates
    over (j, i]; ``place`` [C, C·s] = queryᵀ; ``cum`` [C, C] the inclusive cumulative sum;
    ``ref`` [C, C] the sum up to the row's block (b just before it)."""
    p = np.arange(C * s)
    i, jj = p // s, p % s
    j = (i // s) * s + jj
    col = np.arange(C)[None, :]
    query = col == i[:, None]
    key = (col == j[:, None]) & (jj <= i % s)[:, None]
    span = (col > j[:, None]) & (col <= i[:, None])
    rows = np.arange(C)[:, None]
    cum = col <= rows
    ref = col < (rows // s) * s
    as_bf16 = lambda m: jnp.asarray(m, jnp.bfloat16)  # noqa: E731  (0 and 1 are exact)
    return tuple(map(as_bf16, (query, key, span, query.T, cum, ref)))


def gather(mask: jax.Array, x: jax.Array) -> jax.Array:
    """``mask @ x`` for a 0/1 ``mask``, exact in float32: bfloat16 ``x`` in one MXU pass;
    float32 ``x`` as three bfloat16 pieces (8 + 8 + 8 significant bits), half the passes of
    a HIGHEST-precision dot, which a 0/1 matrix does not need."""
    if x.dtype != F32:
        return dot(mask, x, (1, 0), x.dtype)
    mask = mask.astype(jnp.bfloat16)
    total = jnp.zeros((mask.shape[0], x.shape[1]), F32)
    for _ in range(3):
        piece = x.astype(jnp.bfloat16)
        total = total + dot(mask, piece, (1, 0), jnp.bfloat16)
        x = x - piece.astype(F32)
    return total


def repeat_rows(x: jax.Array, s: int) -> jax.Array:
    """[C, K] -> [C·s, K], row i repeated s times: what ``query`` gathers, on the vector unit."""
    C, K = x.shape
    return jnp.broadcast_to(x[:, None, :], (C, s, K)).reshape(C * s, K)


def tile_blocks(x: jax.Array, s: int) -> jax.Array:
    """[C, K] -> [C·s, K], each block of s rows repeated s times: the key row j of every pair
    (``key`` before its causal zeros), on the vector unit."""
    C, K = x.shape
    blocks = x.reshape(C // s, 1, s, K)
    return jnp.broadcast_to(blocks, (C // s, s, s, K)).reshape(C * s, K)


def pair_rows(q, k, g, masks: dict, s: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(query row, key row, Σ g over (j, i]) of every pair p = (i, j), as [C·s, K] arrays."""
    if PAIRS == "gather":
        return gather(masks["query"], q), gather(masks["key"], k), gather(masks["span"], g)
    # c: the gates summed within the row's own block; c_i - c_j is Σ g over (j, i] for the
    # pair's two rows of one block, each at most s terms (no cancellation of chunk sums).
    within = (masks["cum"].astype(F32) - masks["ref"].astype(F32)).astype(jnp.bfloat16)
    c = gather(within, g)
    span = repeat_rows(c, s) - tile_blocks(c, s)
    return repeat_rows(q.astype(F32), s), tile_blocks(k.astype(F32), s), span


def chunk(refs: dict, st: jax.Array, *, C: int, s: int, scale: float, dtype) -> tuple:
    """(o [C, V] float32, the new transposed state [V, K]) of one chunk; ``refs`` holds the
    chunk's q, k, v, g blocks and the ``masks`` by name."""
    q, k, v, g = (refs[n][...] for n in "qkvg")
    named = {n: refs[n][...] for n in MASK_NAMES}
    key, place, cum, ref = (named[n] for n in ("key", "place", "cum", "ref"))

    b = gather(cum, g)  # [C, K] in-chunk cumulative gates, float32 sums
    b_last = jnp.sum(g.astype(F32), axis=0, keepdims=True)  # [1, K]
    qs = q.astype(F32) * scale
    k32 = k.astype(F32)

    # Diagonal blocks: every causal pair (i, j) of a block as one row.
    qp, kp, span = pair_rows(q, k, g, named, s)  # [C·s, K] each
    decay = jnp.exp(jnp.minimum(span, 0.0))  # exp(b_i - b_j) <= 1
    # [C·s, 1]; a pair above the diagonal gets a finite score that ``key`` zeroes below
    score = jnp.sum(qp * scale * kp * decay, axis=1, keepdims=True)
    # [C, C], the diagonal blocks; a bfloat16 score is rounded where a @ v would round it
    a = gather(place, (score * key.astype(F32)).astype(v.dtype))

    # Off-diagonal blocks, factored around each block's reference r = b just before it:
    # sub-chunk n's own rows of q against the keys before it, one [s, C] product each.
    q_r = qs * jnp.exp(b - gather(ref, g))  # exp(b_i - r) <= 1
    row, col = iota((C, g.shape[1]), 0), iota((s, C), 1)
    parts = [jnp.zeros((s, C), F32)]
    for n in range(1, C // s):
        r = jnp.sum(jnp.where(row < n * s, g.astype(F32), 0.0), axis=0, keepdims=True)
        k_r = k32 * jnp.exp(jnp.minimum(r - b, 0.0))  # exp(r - b_j) <= 1 for j < n·s
        part = dot(q_r[n * s : (n + 1) * s], k_r, (1, 1), dtype)
        parts.append(jnp.where(col < n * s, part, 0.0))
    a = a + jnp.concatenate(parts, axis=0)

    o = dot(qs * jnp.exp(b), st, (1, 1), dtype) + dot(a, v, (1, 0), dtype)
    return o, advance_state(st, k32, v, b, b_last, dtype)
