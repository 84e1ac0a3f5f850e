"""Pallas chunked forward pass of gated linear attention (Yang et al., 2023).

Two variants, because TPU and GPU differ in how a state survives from one chunk to the next:

* ``backend="tpu"`` (Mosaic): grid (B, H, chunks), the chunk axis "arbitrary" (sequential),
  the float32 state in a VMEM scratch buffer that persists across grid steps. Its chunk body
  is ``forward_tpu.chunk`` (0.4.0; 8-row diagonal blocks since 0.5.0): whole-chunk
  operations, no loop over key columns.
* ``backend="gpu"`` (Triton): Triton has no scratch that outlives a grid step, so the grid is
  (B, H) and an in-kernel ``fori_loop`` walks the chunks carrying the state as a loop value.

The GPU chunk body (`_chunk`) uses only row slices of refs, 2-D elementwise ops, row/column
reductions and 2-D matmuls (no value slicing, no cumsum, no 3-D tensors), the common subset
of both lowerings (the TPU variant ran it up to 0.3.0).

Numerical stability (the paper's secondary chunking). With b = cumsum(gk) inside a chunk
(b is non-increasing since gk <= 0), the gated score is A[i, j] = Σ_k q_ik k_jk exp(b_ik - b_jk).
Splitting exp(b_i - b_j) into exp(b_i)·exp(-b_j) overflows once the chunk's decay passes ~88
nats, so the chunk is cut into sub-chunks of 16 rows:

* off-diagonal sub-blocks (key sub-chunk before the query sub-chunk) factor around r, the value
  of b just before the query sub-chunk: exp(b_i - r) <= 1 and exp(r - b_j) <= 1, one matmul;
* diagonal sub-blocks use exp(b_i - b_j) pairwise (i >= j, so <= 1), one key column at a time;
* inter-chunk terms use exp(b_i) and exp(b_C - b_j), both <= 1.

No factor exceeds 1, so strong decay underflows to the correct ~0 instead of giving inf/NaN.

``chunk_gla`` is differentiable: a ``jax.custom_vjp`` whose backward runs the Pallas kernels
of ``kernels.gla.backward`` (dq, dk, dv, dgk and the initial state's gradient).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import triton as pltriton

from kernels.gla import forward_tpu
from kernels.gla.backward import chunk_gla_bwd
from kernels.gla.common import (
    F32,
    Backend,
    Load,
    advance_state,
    check_chunk_size,
    cumsum_rows,
    default_backend,
    from_bhtd,
    iota,
    resolve,
    to_bhtd,
    tpu_interpreter_forced,
    where_lowered,
)
from kernels.gla.common import dot as _dot
from kernels.gla.cost import SUB_CHUNK, gla_bytes, gla_flops, gla_transcendentals

__all__ = ["chunk_gla", "chunk_gla_bwd", "default_backend", "tpu_interpreter_forced"]

Store = Callable[[int, int, jax.Array], None]


def _chunk(
    load: Load, store_o: Store, st: jax.Array, *, C: int, scale: float, dtype: jnp.dtype
) -> jax.Array:
    """Output rows of one chunk via ``store_o``; returns the new state, transposed ([V, K])."""
    s = SUB_CHUNK
    g = load("g", 0, C).astype(F32)  # [C, K] log forget gates
    k = load("k", 0, C).astype(F32)
    v = load("v", 0, C)  # [C, V], fed to the matmuls in the input dtype
    b = cumsum_rows(g, 0, C)  # [C, K]: in-chunk inclusive cumsum of the gates
    b_last = jnp.sum(g, axis=0, keepdims=True)  # [1, K] = b at the chunk's last row
    row_c = iota((C, g.shape[1]), 0)
    sub_row, sub_col = iota((s, C), 0), iota((s, C), 1)

    for lo in range(0, C, s):  # query sub-chunks, unrolled (C // s is small)
        q_i = load("q", lo, s).astype(F32) * scale  # [s, K]
        k_i = load("k", lo, s).astype(F32)
        b_i = cumsum_rows(g, lo, s)

        # Inter-chunk: contribution of the state entering this chunk, exp(b_i) <= 1.
        o_i = _dot(q_i * jnp.exp(b_i), st, (1, 1), dtype)  # [s, V]

        # Diagonal sub-block, one key column jj at a time: exp(b_i - b_jj) for rows i >= jj.
        def column(jj: jax.Array, a: jax.Array, q_i=q_i, k_i=k_i, b_i=b_i, lo=lo) -> jax.Array:
            pick = iota((s, 1), 0) == jj
            k_j = jnp.sum(jnp.where(pick, k_i, 0.0), axis=0, keepdims=True)  # [1, K]
            b_j = jnp.sum(jnp.where(pick, b_i, 0.0), axis=0, keepdims=True)
            w = q_i * k_j * jnp.exp(jnp.minimum(b_i - b_j, 0.0))
            w = jnp.sum(w, axis=1, keepdims=True)  # [s, 1]
            return a + jnp.where((sub_col == lo + jj) & (sub_row >= jj), w, 0.0)

        a = lax.fori_loop(0, s, column, jnp.zeros((s, C), F32))

        if lo:
            # Off-diagonal: keys of earlier sub-chunks, factored around r = b[lo - 1].
            r = jnp.sum(jnp.where(row_c < lo, g, 0.0), axis=0, keepdims=True)  # [1, K]
            q_r = q_i * jnp.exp(b_i - r)  # b_i <= r
            k_r = k * jnp.exp(jnp.minimum(r - b, 0.0))  # b_j >= r for the kept j < lo
            a_off = _dot(q_r, k_r, (1, 1), dtype)  # [s, C]
            a = a + jnp.where(sub_col < lo, a_off, 0.0)

        o_i = o_i + _dot(a, v, (1, 0), dtype)
        store_o(lo, s, o_i)

    return advance_state(st, k, v, b, b_last, dtype)


class _Config(NamedTuple):
    C: int  # chunk size
    n_chunks: int
    has_h0: bool
    store_ht: bool
    scale: float
    dtype: jnp.dtype  # matmul operand dtype


def _unpack(refs: tuple, cfg: _Config) -> tuple[dict, Any, Any, Any, list]:
    """(q, k, v, g by name; h0 or None; o; ht or None; scratch refs) from pallas's refs."""
    named = dict(zip("qkvg", refs[:4], strict=True))
    rest = list(refs[4:])
    h0_ref = rest.pop(0) if cfg.has_h0 else None
    o_ref = rest.pop(0)
    ht_ref = rest.pop(0) if cfg.store_ht else None
    return named, h0_ref, o_ref, ht_ref, rest


def _tpu_kernel(*refs: Any, cfg: _Config) -> None:
    """Grid (B, H, chunk): one chunk per step, state in VMEM scratch across the chunk axis;
    the chunk body is ``forward_tpu.chunk`` (whole-chunk operations, its masks as inputs)."""
    n_masks = len(forward_tpu.MASK_NAMES)
    named, h0_ref, o_ref, ht_ref, (st_ref,) = _unpack(refs[:4] + refs[4 + n_masks :], cfg)
    named.update(zip(forward_tpu.MASK_NAMES, refs[4 : 4 + n_masks], strict=True))
    t = pl.program_id(2)

    @pl.when(t == 0)
    def _init() -> None:
        st_ref[...] = h0_ref[...] if h0_ref is not None else jnp.zeros(st_ref.shape, F32)

    o, st_ref[...] = forward_tpu.chunk(
        named, st_ref[...], C=cfg.C, s=forward_tpu.DIAG, scale=cfg.scale, dtype=cfg.dtype
    )
    o_ref[...] = o.astype(o_ref.dtype)

    if ht_ref is not None:

        @pl.when(t == cfg.n_chunks - 1)
        def _final() -> None:
            ht_ref[...] = st_ref[...]


def _gpu_kernel(*refs: Any, cfg: _Config) -> None:
    """Grid (B, H): the whole padded sequence per program, a fori_loop over its chunks."""
    named, h0_ref, o_ref, ht_ref, _ = _unpack(refs, cfg)
    V, K = named["v"].shape[-1], named["q"].shape[-1]

    def body(c: jax.Array, st: jax.Array) -> jax.Array:
        base = pl.multiple_of(c * cfg.C, cfg.C)

        def load(name: str, lo: int, n: int) -> jax.Array:
            return named[name][pl.ds(base + lo, n), :]

        def store_o(lo: int, n: int, val: jax.Array) -> None:
            o_ref[pl.ds(base + lo, n), :] = val.astype(o_ref.dtype)

        return _chunk(load, store_o, st, C=cfg.C, scale=cfg.scale, dtype=cfg.dtype)

    st0 = h0_ref[...].astype(F32) if h0_ref is not None else jnp.zeros((V, K), F32)
    st = lax.fori_loop(0, cfg.n_chunks, body, st0)
    if ht_ref is not None:
        ht_ref[...] = st


class _Options(NamedTuple):
    """The static arguments of one ``chunk_gla`` call (hashable: custom_vjp's nondiff)."""

    scale: float
    output_final_state: bool
    chunk_size: int
    interpret: bool | None
    backend: Backend | None


def _forward_call(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    gk: jax.Array,
    initial_state: jax.Array | None,
    opts: _Options,
    interpret: bool,
    backend: Backend,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """One forward pallas_call for an explicit variant."""
    B, T, H, K = q.shape
    V = v.shape[-1]
    C = opts.chunk_size
    n_chunks = pl.cdiv(T, C)
    T_pad = n_chunks * C
    dtype = q.dtype  # matmul operand dtype; float32 inputs get float32 precision

    args = [to_bhtd(x, T_pad) for x in (q, k, v, gk)]
    has_h0 = initial_state is not None
    if has_h0:
        args.append(initial_state.astype(F32).swapaxes(-1, -2))  # Sᵀ: [B, H, V, K]

    store_ht = opts.output_final_state
    out_shape = [jax.ShapeDtypeStruct((B, H, T_pad, V), v.dtype)]
    if store_ht:
        out_shape.append(jax.ShapeDtypeStruct((B, H, V, K), F32))
    cfg = _Config(C, n_chunks, has_h0, store_ht, opts.scale, dtype)
    sq = pl.squeezed
    cost = pl.CostEstimate(
        flops=gla_flops(B, T_pad, H, K, V, C),
        transcendentals=gla_transcendentals(B, T_pad, H, K, C),
        bytes_accessed=gla_bytes(B, T_pad, H, K, V, q.dtype.itemsize, n_states=has_h0 + store_ht),
    )

    if backend == "tpu":
        seq = lambda d: pl.BlockSpec((sq, sq, C, d), lambda b, h, t: (b, h, t, 0))  # noqa: E731
        state = pl.BlockSpec((sq, sq, V, K), lambda b, h, t: (b, h, 0, 0))
        masks = forward_tpu.masks(C, forward_tpu.DIAG)
        whole = [pl.BlockSpec(m.shape, lambda b, h, t: (0, 0)) for m in masks]
        args[4:4] = masks
        call = pl.pallas_call(
            functools.partial(_tpu_kernel, cfg=cfg),
            out_shape=out_shape,
            grid=(B, H, n_chunks),
            in_specs=[seq(K), seq(K), seq(V), seq(K), *whole] + [state] * has_h0,
            out_specs=[seq(V)] + [state] * store_ht,
            scratch_shapes=[pltpu.VMEM((V, K), F32)],
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel", "parallel", "arbitrary")
            ),
            cost_estimate=cost,
            interpret=interpret,
            name="chunk_gla_fwd",
        )
    else:
        seq = lambda d: pl.BlockSpec((sq, sq, T_pad, d), lambda b, h: (b, h, 0, 0))  # noqa: E731
        state = pl.BlockSpec((sq, sq, V, K), lambda b, h: (b, h, 0, 0))
        call = pl.pallas_call(
            functools.partial(_gpu_kernel, cfg=cfg),
            out_shape=out_shape,
            grid=(B, H),
            in_specs=[seq(K), seq(K), seq(V), seq(K)] + [state] * has_h0,
            out_specs=[seq(V)] + [state] * store_ht,
            compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=2),
            cost_estimate=cost,
            interpret=interpret,
            name="chunk_gla_fwd",
        )

    outs = call(*args)
    o = from_bhtd(outs[0], T)
    if store_ht:
        return o, outs[1].swapaxes(-1, -2)
    return o


Array = jax.Array
MaybeArray = jax.Array | None
Outputs = jax.Array | tuple[jax.Array, jax.Array]


def _forward(q: Array, k: Array, v: Array, gk: Array, h0: MaybeArray, opts: _Options) -> Outputs:
    if opts.interpret is None and opts.backend is None:
        variant = lambda backend, interpret: functools.partial(  # noqa: E731
            _forward_call, opts=opts, interpret=interpret, backend=backend
        )
        return where_lowered(variant, (q, k, v, gk, h0))
    return _forward_call(q, k, v, gk, h0, opts, *resolve(opts.interpret, opts.backend))


@functools.partial(jax.custom_vjp, nondiff_argnums=(5,))
def _gla(q: Array, k: Array, v: Array, gk: Array, h0: MaybeArray, opts: _Options) -> Outputs:
    return _forward(q, k, v, gk, h0, opts)


def _gla_fwd(
    q: Array, k: Array, v: Array, gk: Array, h0: MaybeArray, opts: _Options
) -> tuple[Outputs, tuple]:
    # Residuals are the inputs only: the backward recomputes the chunk states
    # (kernels.gla.backward explains why, by memory).
    return _forward(q, k, v, gk, h0, opts), (q, k, v, gk, h0)


def _gla_bwd(opts: _Options, residuals: tuple, cotangents: Any) -> tuple:
    q, k, v, gk, initial_state = residuals
    do, dht = cotangents if opts.output_final_state else (cotangents, None)
    return chunk_gla_bwd(
        q,
        k,
        v,
        gk,
        do,
        scale=opts.scale,
        initial_state=initial_state,
        dht=dht,
        chunk_size=opts.chunk_size,
        interpret=opts.interpret,
        backend=opts.backend,
    )


_gla.defvjp(_gla_fwd, _gla_bwd)


@functools.partial(
    jax.jit,
    static_argnames=("scale", "output_final_state", "chunk_size", "interpret", "backend"),
)
def chunk_gla(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    gk: jax.Array,
    *,
    scale: float | None = None,
    initial_state: jax.Array | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
    interpret: bool | None = None,
    backend: Backend | None = None,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Chunked GLA forward, differentiable. q, k, gk: [B, T, H, K]; v: [B, T, H, V]; gk <= 0.

    The wrapper pads T to a multiple of ``chunk_size`` and lays tensors out as [B, H, T, ·]
    so every block's last two dims are (rows, K or V), as Mosaic's tiling wants.

    Returns o [B, T, H, V] (v's dtype) and, with ``output_final_state``, the float32 final
    state [B, H, K, V]. ``interpret`` defaults to True on CPU; ``backend`` ("tpu" or "gpu")
    to the variant for the default device; with neither given, the variant is chosen where
    jax lowers (``jax.lax.platform_dependent``). ``jax.grad`` / ``jax.vjp`` run the Pallas
    backward (``chunk_gla_bwd``) with the same variant choice.
    """
    K = q.shape[-1]
    if k.shape != q.shape or gk.shape != q.shape or v.shape[:3] != q.shape[:3]:
        raise ValueError(f"shape mismatch: q{q.shape} k{k.shape} v{v.shape} gk{gk.shape}")
    check_chunk_size(chunk_size)
    if backend is not None and backend not in ("tpu", "gpu"):
        raise ValueError(f"backend must be 'tpu' or 'gpu', got {backend!r}")
    scale = K**-0.5 if scale is None else float(scale)
    opts = _Options(scale, output_final_state, chunk_size, interpret, backend)
    return _gla(q, k, v, gk, initial_state, opts)
