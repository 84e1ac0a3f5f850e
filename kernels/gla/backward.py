"""Pallas chunked backward of gated linear attention: dq, dk, dv, dgk and dh0.

Two pallas_calls, each in a TPU (Mosaic) and a GPU (Triton) variant like the forward's:

1. ``chunk_gla_states``: the state entering every chunk, S_in [T/C, V, K] float32,
   recomputed from k, v, gk (and h0) by the forward's own state update, chunks in order.
2. ``chunk_gla_bwd``: the chunks in reverse order, carrying dS (VMEM scratch on TPU, grid
   (B, H, chunk) with reversed index maps; a loop value on GPU, grid (B, H)); per chunk it
   writes dq, dk, dv, dgk (``kernels.gla.backward_chunk`` has the arithmetic; on TPU
   ``kernels.gla.backward_tpu`` lays it out without loops, since 0.6.0) and passes dS_in
   on; after the first chunk, dS_in is dh0.

Save or recompute the chunk states: they are float32 [B, H, T/C, K, V], 4·K·V/C bytes per
token and head; for K = V = 128, C = 64 that is 1 KiB, as much as q, k, v and gk together in
bfloat16. Saved by the forward they would double what a training step keeps alive per layer
between forward and backward, and add ~80 % to the forward's HBM writes. Recomputed in the
backward they cost one more read of k, v, gk, a transient write and read of the states (freed
when the backward returns) and 2·K·V FLOPs per token (~10-15 % of the backward's). So the
forward saves only its inputs, and the backward recomputes, as FLA's chunk_gla does.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import triton as pltriton

from kernels.gla import backward_tpu
from kernels.gla.backward_chunk import bwd_chunk, states_chunk
from kernels.gla.common import (
    F32,
    Backend,
    check_chunk_size,
    from_bhtd,
    resolve,
    to_bhtd,
    where_lowered,
)
from kernels.gla.cost import gla_backward_call_costs

Grads = tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array | None]


class _Config(NamedTuple):
    C: int  # chunk size
    n_chunks: int
    has_h0: bool
    has_dht: bool
    scale: float
    dtype: Any  # matmul operand dtype


SEQ_IN = ("q", "k", "v", "g", "do")
GRADS = ("dq", "dk", "dv", "dg")


def _states_tpu(*refs: Any, cfg: _Config) -> None:
    """Grid (B, H, chunk): writes the state entering each chunk; state in VMEM scratch."""
    named = dict(zip("kvg", refs[:3], strict=True))
    h0_ref = refs[3] if cfg.has_h0 else None
    h_ref, st_ref = refs[3 + cfg.has_h0 :]

    @pl.when(pl.program_id(2) == 0)
    def _init() -> None:
        st_ref[...] = h0_ref[...] if h0_ref is not None else jnp.zeros(st_ref.shape, F32)

    h_ref[...] = st_ref[...]
    load = lambda name, lo, n: named[name][pl.ds(lo, n), :]  # noqa: E731
    st_ref[...] = states_chunk(load, st_ref[...], C=cfg.C, dtype=cfg.dtype)


def _states_gpu(*refs: Any, cfg: _Config) -> None:
    """Grid (B, H): a fori_loop over the chunks; h rows c·V..(c+1)·V hold chunk c's state."""
    named = dict(zip("kvg", refs[:3], strict=True))
    h0_ref = refs[3] if cfg.has_h0 else None
    h_ref = refs[3 + cfg.has_h0]
    V, K = named["v"].shape[-1], named["k"].shape[-1]

    def body(c: jax.Array, st: jax.Array) -> jax.Array:
        base = pl.multiple_of(c * cfg.C, cfg.C)
        h_ref[pl.ds(pl.multiple_of(c * V, V), V), :] = st
        load = lambda name, lo, n: named[name][pl.ds(base + lo, n), :]  # noqa: E731
        return states_chunk(load, st, C=cfg.C, dtype=cfg.dtype)

    st0 = h0_ref[...].astype(F32) if h0_ref is not None else jnp.zeros((V, K), F32)
    lax.fori_loop(0, cfg.n_chunks, body, st0)


def _unpack(refs: tuple, cfg: _Config) -> tuple[dict, Any, Any, dict, Any, list]:
    """(inputs by name; h; dht or None; grads by name; dh0 or None; scratch) from refs."""
    named = dict(zip(SEQ_IN, refs[:5], strict=True))
    rest = list(refs[5:])
    h_ref = rest.pop(0)
    dht_ref = rest.pop(0) if cfg.has_dht else None
    grads = {name: rest.pop(0) for name in GRADS}
    dh0_ref = rest.pop(0) if cfg.has_h0 else None
    return named, h_ref, dht_ref, grads, dh0_ref, rest


def _bwd_tpu(*refs: Any, cfg: _Config) -> None:
    """Grid (B, H, chunk), chunks visited last to first; dSᵀ in VMEM scratch. The chunk
    body is ``backward_tpu.bwd_chunk`` (whole-chunk operations, its masks as inputs)."""
    n_masks = len(backward_tpu.MASK_NAMES)
    named, h_ref, dht_ref, grads, dh0_ref, (dst_ref,) = _unpack(refs[:5] + refs[5 + n_masks :], cfg)
    named.update(zip(backward_tpu.MASK_NAMES, refs[5 : 5 + n_masks], strict=True))
    t = pl.program_id(2)

    @pl.when(t == 0)
    def _init() -> None:
        dst_ref[...] = dht_ref[...] if dht_ref is not None else jnp.zeros(dst_ref.shape, F32)

    out, dst_ref[...] = backward_tpu.bwd_chunk(
        named, h_ref[...], dst_ref[...], C=cfg.C, s=backward_tpu.DIAG, scale=cfg.scale,
        dtype=cfg.dtype,
    )  # fmt: skip
    for name, val in out.items():
        grads[name][...] = val.astype(grads[name].dtype)
    if dh0_ref is not None:

        @pl.when(t == cfg.n_chunks - 1)
        def _final() -> None:
            dh0_ref[...] = dst_ref[...]


def _bwd_gpu(*refs: Any, cfg: _Config) -> None:
    """Grid (B, H): a fori_loop over the chunks, last to first, carrying dSᵀ."""
    named, h_ref, dht_ref, grads, dh0_ref, _ = _unpack(refs, cfg)
    V, K = named["v"].shape[-1], named["q"].shape[-1]

    def body(i: jax.Array, dst: jax.Array) -> jax.Array:
        c = cfg.n_chunks - 1 - i
        base = pl.multiple_of(c * cfg.C, cfg.C)

        def load(name: str, lo: int, n: int) -> jax.Array:
            return named[name][pl.ds(base + lo, n), :]

        def store(name: str, lo: int, n: int, val: jax.Array) -> None:
            grads[name][pl.ds(base + lo, n), :] = val.astype(grads[name].dtype)

        st = h_ref[pl.ds(pl.multiple_of(c * V, V), V), :]
        return bwd_chunk(load, store, st, dst, C=cfg.C, scale=cfg.scale, dtype=cfg.dtype)

    dst0 = dht_ref[...].astype(F32) if dht_ref is not None else jnp.zeros((V, K), F32)
    dst = lax.fori_loop(0, cfg.n_chunks, body, dst0)
    if dh0_ref is not None:
        dh0_ref[...] = dst


class _Specs(NamedTuple):
    """Grid and BlockSpecs of the two calls for one variant."""

    grid: tuple[int, ...]
    params: Any
    states_in: list
    states_out: Any
    bwd_in: list
    bwd_out: list
    scratch: list


def _specs(backend: Backend, cfg: _Config, T_pad: int, K: int, V: int, masks: tuple) -> _Specs:
    """TPU: grid (B, H, chunk), the backward's index maps visiting chunks last to first, the
    0/1 ``masks`` whole at every step; GPU: grid (B, H), whole sequences per program,
    in-kernel loops over the chunks."""
    sq, n = pl.squeezed, cfg.n_chunks
    if backend == "tpu":
        fwd = lambda b, h, t: (b, h, t, 0)  # noqa: E731
        rev = lambda b, h, t: (b, h, n - 1 - t, 0)  # noqa: E731
        seq = lambda d, index: pl.BlockSpec((sq, sq, cfg.C, d), index)  # noqa: E731
        chunk_state = lambda index: pl.BlockSpec((sq, sq, V, K), index)  # noqa: E731
        state = chunk_state(lambda b, h, t: (b, h, 0, 0))
        seq_in = [seq(K, rev), seq(K, rev), seq(V, rev), seq(K, rev), seq(V, rev)]
        whole = [pl.BlockSpec(m.shape, lambda b, h, t: (0, 0)) for m in masks]
        return _Specs(
            grid=(-1, -1, n),
            params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
            states_in=[seq(K, fwd), seq(V, fwd), seq(K, fwd)] + [state] * cfg.has_h0,
            states_out=chunk_state(fwd),
            bwd_in=seq_in + whole + [chunk_state(rev)] + [state] * cfg.has_dht,
            bwd_out=seq_in[:4] + [state] * cfg.has_h0,
            scratch=[pltpu.VMEM((V, K), F32)],
        )
    whole = lambda rows, d: pl.BlockSpec((sq, sq, rows, d), lambda b, h: (b, h, 0, 0))  # noqa: E731
    state, seq_in = whole(V, K), [whole(T_pad, d) for d in (K, K, V, K, V)]
    return _Specs(
        grid=(-1, -1),
        params=pltriton.CompilerParams(num_warps=4, num_stages=2),
        states_in=seq_in[1:4] + [state] * cfg.has_h0,
        states_out=whole(n * V, K),
        bwd_in=seq_in + [whole(n * V, K)] + [state] * cfg.has_dht,
        bwd_out=seq_in[:4] + [state] * cfg.has_h0,
        scratch=[],
    )


def _bwd_call(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    gk: jax.Array,
    do: jax.Array,
    initial_state: jax.Array | None,
    dht: jax.Array | None,
    *,
    scale: float,
    chunk_size: int,
    interpret: bool,
    backend: Backend,
) -> Grads:
    """The two pallas_calls for an explicit variant; gradients in the inputs' dtypes."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    n = pl.cdiv(T, chunk_size)
    T_pad = n * chunk_size
    qt, kt, vt, gt, dot_ = (to_bhtd(x, T_pad) for x in (q, k, v, gk, do.astype(v.dtype)))
    h0t = [] if initial_state is None else [initial_state.astype(F32).swapaxes(-1, -2)]
    dhtt = [] if dht is None else [dht.astype(F32).swapaxes(-1, -2)]
    cfg = _Config(chunk_size, n, bool(h0t), bool(dhtt), scale, q.dtype)
    tpu = backend == "tpu"
    masks = backward_tpu.masks(chunk_size, backward_tpu.DIAG) if tpu else ()
    spec = _specs(backend, cfg, T_pad, K, V, masks)
    grid = (B, H, *spec.grid[2:])
    body = {"sub": backward_tpu.DIAG, "pair_exps": 1} if tpu else {}
    costs = gla_backward_call_costs(
        B, T_pad, H, K, V, q.dtype.itemsize, chunk_size, has_h0=cfg.has_h0,
        has_dht=cfg.has_dht, mask_bytes=sum(m.size * m.dtype.itemsize for m in masks), **body,
    )  # fmt: skip
    state_shape = jax.ShapeDtypeStruct((B, H, V, K), F32)
    h = pl.pallas_call(
        functools.partial(_states_tpu if tpu else _states_gpu, cfg=cfg),
        out_shape=jax.ShapeDtypeStruct((B, H, n * V, K), F32),  # chunk c's S_inᵀ: rows c·V..
        grid=grid,
        in_specs=spec.states_in,
        out_specs=spec.states_out,
        scratch_shapes=spec.scratch,
        compiler_params=spec.params,
        cost_estimate=pl.CostEstimate(**costs["states"]),
        interpret=interpret,
        name="chunk_gla_states",
    )(kt, vt, gt, *h0t)
    outs = pl.pallas_call(
        functools.partial(_bwd_tpu if tpu else _bwd_gpu, cfg=cfg),
        out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype) for x in (qt, kt, vt, gt)]
        + [state_shape] * cfg.has_h0,
        grid=grid,
        in_specs=spec.bwd_in,
        out_specs=spec.bwd_out,
        scratch_shapes=spec.scratch,
        compiler_params=spec.params,
        cost_estimate=pl.CostEstimate(**costs["bwd"]),
        interpret=interpret,
        name="chunk_gla_bwd",
    )(qt, kt, vt, gt, dot_, *masks, h, *dhtt)
    dq, dk, dv, dg = (from_bhtd(x, T) for x in outs[:4])
    dh0 = outs[4].swapaxes(-1, -2).astype(initial_state.dtype) if cfg.has_h0 else None
    return dq, dk, dv, dg, dh0


def chunk_gla_bwd(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    gk: jax.Array,
    do: jax.Array,
    *,
    scale: float | None = None,
    initial_state: jax.Array | None = None,
    dht: jax.Array | None = None,
    chunk_size: int = 64,
    interpret: bool | None = None,
    backend: Backend | None = None,
) -> Grads:
    """(dq, dk, dv, dgk, dh0) of ``chunk_gla`` for output cotangent ``do`` [B, T, H, V].

    ``dht`` is the cotangent of the final state [B, H, K, V] (None: zero); dh0 is None
    without ``initial_state``. Same variant choice as ``chunk_gla``: with neither
    ``interpret`` nor ``backend``, where jax lowers. Gradients come in the inputs' dtypes.
    """
    check_chunk_size(chunk_size)
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    static = {"scale": scale, "chunk_size": chunk_size}
    if interpret is None and backend is None:
        variant = lambda backend, interpret: functools.partial(  # noqa: E731
            _bwd_call, **static, interpret=interpret, backend=backend
        )
        return where_lowered(variant, (q, k, v, gk, do, initial_state, dht))
    interpret, backend = resolve(interpret, backend)
    return _bwd_call(
        q, k, v, gk, do, initial_state, dht, **static, interpret=interpret, backend=backend
    )
