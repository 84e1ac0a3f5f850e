"""The float32 token-by-token recurrence that defines GLA and serves as the correctness gate.

    S_t = diag(exp(gk_t)) · S_{t-1} + k_tᵀ v_t,    o_t = scale · q_t · S_t,    S_0 = h0 or 0.

It uses no matmuls (only elementwise products and sums), so its float32 result does not depend
on a backend's default matmul precision (bfloat16 passes on TPU, TF32 on GPU).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax


@functools.partial(jax.jit, static_argnames=("scale", "output_final_state"))
def recurrent_gla(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    gk: jax.Array,
    *,
    scale: float | None = None,
    initial_state: jax.Array | None = None,
    output_final_state: bool = False,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """GLA by its definition. q, k, gk: [B, T, H, K]; v: [B, T, H, V]; state [B, H, K, V].

    Returns o [B, T, H, V] in float32, and the final state when ``output_final_state``.
    """
    B, _, H, K = q.shape
    V = v.shape[-1]
    scale = K**-0.5 if scale is None else scale
    f32 = jnp.float32
    # Scan over time: move T to the front -> [T, B, H, ·].
    xs = tuple(jnp.moveaxis(x.astype(f32), 1, 0) for x in (q, k, v, gk))
    s0 = jnp.zeros((B, H, K, V), f32) if initial_state is None else initial_state.astype(f32)

    def step(s: jax.Array, x: tuple[jax.Array, ...]) -> tuple[jax.Array, jax.Array]:
        q_t, k_t, v_t, g_t = x
        s = jnp.exp(g_t)[..., :, None] * s + k_t[..., :, None] * v_t[..., None, :]
        o_t = scale * jnp.sum(q_t[..., :, None] * s, axis=-2)
        return s, o_t

    s_final, o = lax.scan(step, s0, xs)
    o = jnp.moveaxis(o, 0, 1)
    return (o, s_final) if output_final_state else o
