"""GLA inputs shared by the backward's numerical and lowering tests."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def inputs(B, T, H, K, V, *, seed=0, dtype=jnp.float32, gate=None):
    """q, k, v, gk in ``dtype`` (FLA-style gates unless ``gate``); float32 h0, do, dht."""
    keys = jax.random.split(jax.random.key(seed), 7)
    q = jax.random.normal(keys[0], (B, T, H, K))
    k = jax.random.normal(keys[1], (B, T, H, K))
    v = jax.random.normal(keys[2], (B, T, H, V))
    shape = (B, T, H, K)
    gk = (
        jax.nn.log_sigmoid(jax.random.normal(keys[3], shape)) / 16
        if gate is None
        else gate(keys[3], shape)
    )
    h0 = jax.random.normal(keys[4], (B, H, K, V))
    do = jax.random.normal(keys[5], (B, T, H, V)).astype(dtype)
    dht = jax.random.normal(keys[6], (B, H, K, V))
    return tuple(x.astype(dtype) for x in (q, k, v, gk)), h0, do, dht
