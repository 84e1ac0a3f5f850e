"""Pure-JAX chunked GLA: the baseline a user would write without Pallas.

A ``lax.scan`` over chunks carries the [B, H, K, V] state; inside a chunk everything is
batched jnp/einsum code that XLA fuses. Same algorithm and precision policy as the kernel
(matmul operands in the input dtype, float32 accumulation, float32 gates), and the same
secondary chunking for stability, but written the natural array-program way: the diagonal
sub-blocks materialise the pairwise decay tensor [B, H, C/16, 16, 16, K] instead of looping.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from kernels.gla.cost import SUB_CHUNK

F32 = jnp.float32


def _einsum(spec: str, a: jax.Array, b: jax.Array, dtype: jnp.dtype) -> jax.Array:
    """einsum with operands in ``dtype`` and float32 accumulation (full precision for f32)."""
    precision = lax.Precision.HIGHEST if dtype == F32 else None
    return jnp.einsum(
        spec, a.astype(dtype), b.astype(dtype), precision=precision, preferred_element_type=F32
    )


@functools.partial(jax.jit, static_argnames=("scale", "output_final_state", "chunk_size"))
def chunk_gla_native(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    gk: jax.Array,
    *,
    scale: float | None = None,
    initial_state: jax.Array | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Same contract and return values as ``kernels.gla.kernel.chunk_gla`` (jitted)."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    if chunk_size <= 0 or chunk_size % SUB_CHUNK:
        raise ValueError(f"chunk_size must be a positive multiple of {SUB_CHUNK}")
    scale = K**-0.5 if scale is None else scale
    C, s = chunk_size, SUB_CHUNK
    ns = C // s
    n = -(-T // C)
    dtype = q.dtype

    def chunks(x: jax.Array) -> jax.Array:
        # [B, T, H, D] -> [N, B, H, C, D], zero-padded (gk = 0, k = 0: the state is unchanged).
        x = jnp.pad(x, ((0, 0), (0, n * C - T), (0, 0), (0, 0)))
        return x.reshape(B, n, C, H, -1).transpose(1, 0, 3, 2, 4)

    xs = (chunks(q), chunks(k), chunks(v), chunks(gk))
    h0 = jnp.zeros((B, H, K, V), F32) if initial_state is None else initial_state.astype(F32)

    # Masks over (query sub-chunk, query row, key column) and the diagonal sub-block.
    sub = jnp.arange(ns)[:, None, None]
    col = jnp.arange(C)[None, None, :]
    before = col < sub * s  # [ns, 1, C]: keys in earlier sub-chunks
    causal = jnp.tril(jnp.ones((s, s), bool))
    eye = jnp.eye(ns, dtype=F32)[:, None, :, None]  # places diagonal blocks in [ns, s, ns, s]

    def step(state: jax.Array, x: tuple[jax.Array, ...]) -> tuple[jax.Array, jax.Array]:
        qc, kc, vc, gc = x
        qc = qc.astype(F32) * scale
        kc, gc = kc.astype(F32), gc.astype(F32)
        b = jnp.cumsum(gc, axis=-2)  # [B, H, C, K]
        b_last = b[..., -1:, :]

        o = _einsum("bhck,bhkv->bhcv", qc * jnp.exp(b), state, dtype)

        qs, ks, bs = (x.reshape(B, H, ns, s, K) for x in (qc, kc, b))
        # Reference point r: b just before each query sub-chunk (0 for the first).
        r = jnp.concatenate([jnp.zeros_like(bs[:, :, :1, -1:]), bs[:, :, :-1, -1:]], axis=2)
        q_r = qs * jnp.exp(bs - r)  # [B, H, ns, s, K]
        k_r = kc[:, :, None] * jnp.exp(jnp.minimum(r - b[:, :, None], 0.0))  # [B, H, ns, C, K]
        a = jnp.where(before, _einsum("bhnik,bhnjk->bhnij", q_r, k_r, dtype), 0.0)

        diff = bs[..., :, None, :] - bs[..., None, :, :]  # [B, H, ns, s, s, K]
        decay = jnp.exp(jnp.where(causal[..., None], diff, -jnp.inf))
        a_diag = jnp.einsum(
            "bhnik,bhnjk,bhnijk->bhnij", qs, ks, decay, precision=lax.Precision.HIGHEST
        )
        a = a.reshape(B, H, ns, s, ns, s) + a_diag[:, :, :, :, None, :] * eye
        o = o + _einsum("bhnic,bhcv->bhniv", a.reshape(B, H, ns, s, C), vc, dtype).reshape(
            B, H, C, V
        )

        k_g = kc * jnp.exp(b_last - b)
        state = state * jnp.exp(b_last)[..., 0, :, None] + _einsum(
            "bhck,bhcv->bhkv", k_g, vc, dtype
        )
        return state, o.astype(v.dtype)

    state, o = lax.scan(step, h0, xs)
    o = o.transpose(1, 0, 3, 2, 4).reshape(B, n * C, H, V)[:, :T]
    return (o, state) if output_final_state else o
