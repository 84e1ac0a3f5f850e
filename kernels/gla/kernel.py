"""Pallas chunked forward pass of gated linear attention (Yang et al., 2023).

Two variants share one per-chunk body (`_chunk`), because TPU and GPU differ in how a state
survives from one chunk to the next:

* ``backend="tpu"`` (Mosaic): grid (B, H, chunks), the chunk axis "arbitrary" (sequential),
  the float32 state in a VMEM scratch buffer that persists across grid steps.
* ``backend="gpu"`` (Triton): Triton has no scratch that outlives a grid step, so the grid is
  (B, H) and an in-kernel ``fori_loop`` walks the chunks carrying the state as a loop value.

The chunk body uses only row slices of refs, 2-D elementwise ops, row/column reductions and
2-D matmuls (no value slicing, no cumsum, no 3-D tensors), the common subset of both lowerings.

Numerical stability (the paper's secondary chunking). With b = cumsum(gk) inside a chunk
(b is non-increasing since gk <= 0), the gated score is A[i, j] = Σ_k q_ik k_jk exp(b_ik - b_jk).
Splitting exp(b_i - b_j) into exp(b_i)·exp(-b_j) overflows once the chunk's decay passes ~88
nats, so the chunk is cut into sub-chunks of 16 rows:

* off-diagonal sub-blocks (key sub-chunk before the query sub-chunk) factor around r, the value
  of b just before the query sub-chunk: exp(b_i - r) <= 1 and exp(r - b_j) <= 1, one matmul;
* diagonal sub-blocks use exp(b_i - b_j) pairwise (i >= j, so <= 1), one key column at a time;
* inter-chunk terms use exp(b_i) and exp(b_C - b_j), both <= 1.

No factor exceeds 1, so strong decay underflows to the correct ~0 instead of giving inf/NaN.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import triton as pltriton

from kernels.gla.cost import SUB_CHUNK, gla_bytes, gla_flops, gla_transcendentals

Backend = Literal["tpu", "gpu"]
F32 = jnp.float32
Load = Callable[[str, int, int], jax.Array]
Store = Callable[[int, int, jax.Array], None]


def _dot(a: jax.Array, b: jax.Array, contract: tuple[int, int], dtype: jnp.dtype) -> jax.Array:
    """2-D matmul contracting a's dim contract[0] with b's contract[1], float32 accumulation.

    Operands go to the MXU / tensor cores in ``dtype`` (the input dtype: bf16 stays bf16, as
    a hand-written kernel would); float32 operands ask for full float32 precision.
    """
    precision = lax.Precision.HIGHEST if dtype == F32 else None
    dims = (((contract[0],), (contract[1],)), ((), ()))
    return lax.dot_general(
        a.astype(dtype), b.astype(dtype), dims, precision=precision, preferred_element_type=F32
    )


def _iota(shape: tuple[int, int], dim: int) -> jax.Array:
    return lax.broadcasted_iota(jnp.int32, shape, dim)


def _chunk(
    load: Load, store_o: Store, st: jax.Array, *, C: int, scale: float, dtype: jnp.dtype
) -> jax.Array:
    """Output rows of one chunk via ``store_o``; returns the new state, transposed ([V, K]).

    The state is kept as Sᵀ so the per-key decay exp(b_C) is a row vector broadcast over
    sublanes, which needs no vector transpose on TPU.
    """
    s = SUB_CHUNK
    g = load("g", 0, C).astype(F32)  # [C, K] log forget gates
    k = load("k", 0, C).astype(F32)
    v = load("v", 0, C)  # [C, V], fed to the matmuls in the input dtype
    # In-chunk inclusive cumsum as a triangular matmul (Mosaic has no cumsum), exact in f32.
    tril = jnp.where(_iota((C, C), 1) <= _iota((C, C), 0), 1.0, 0.0).astype(F32)
    b = _dot(tril, g, (1, 0), F32)  # [C, K]
    b_last = jnp.sum(g, axis=0, keepdims=True)  # [1, K] = b at the chunk's last row
    row_c = _iota((C, g.shape[1]), 0)
    sub_row, sub_col = _iota((s, C), 0), _iota((s, C), 1)

    for lo in range(0, C, s):  # query sub-chunks, unrolled (C // s is small)
        q_i = load("q", lo, s).astype(F32) * scale  # [s, K]
        k_i = load("k", lo, s).astype(F32)
        b_i = _dot(jnp.where(sub_col <= sub_row + lo, 1.0, 0.0).astype(F32), g, (1, 0), F32)

        # Inter-chunk: contribution of the state entering this chunk, exp(b_i) <= 1.
        o_i = _dot(q_i * jnp.exp(b_i), st, (1, 1), dtype)  # [s, V]

        # Diagonal sub-block, one key column jj at a time: exp(b_i - b_jj) for rows i >= jj.
        def column(jj: jax.Array, a: jax.Array, q_i=q_i, k_i=k_i, b_i=b_i, lo=lo) -> jax.Array:
            pick = _iota((s, 1), 0) == jj
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

    # State update: Sᵀ <- Sᵀ·diag(exp(b_C)) + vᵀ (k ⊙ exp(b_C - b)), all exponents <= 0.
    k_g = k * jnp.exp(jnp.minimum(b_last - b, 0.0))
    return st * jnp.exp(b_last) + _dot(v, k_g, (0, 0), dtype)


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
    """Grid (B, H, chunk): one chunk per step, state in VMEM scratch across the chunk axis."""
    named, h0_ref, o_ref, ht_ref, (st_ref,) = _unpack(refs, cfg)
    t = pl.program_id(2)

    @pl.when(t == 0)
    def _init() -> None:
        st_ref[...] = h0_ref[...] if h0_ref is not None else jnp.zeros(st_ref.shape, F32)

    def load(name: str, lo: int, n: int) -> jax.Array:
        return named[name][pl.ds(lo, n), :]

    def store_o(lo: int, n: int, val: jax.Array) -> None:
        o_ref[pl.ds(lo, n), :] = val.astype(o_ref.dtype)

    st_ref[...] = _chunk(load, store_o, st_ref[...], C=cfg.C, scale=cfg.scale, dtype=cfg.dtype)

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


def default_backend() -> Backend:
    """The variant for the default device: Mosaic on TPU, Triton on GPU.

    On CPU (interpret mode) the "gpu" variant is chosen too: the interpreter copies whole
    operands at every grid step, so its B·H steps run ~10x faster than the "tpu" variant's
    B·H·chunks steps on long sequences. Both are tested in interpret mode.
    """
    return "tpu" if jax.default_backend() == "tpu" else "gpu"


def tpu_interpreter_forced() -> bool:
    """True under jax's TPU interpreter (``pltpu.force_tpu_interpret_mode``, ci-bench's
    ``cpu-interpret = "tpu"``): then the CPU branch runs the TPU variant, as a TPU would.
    Reads jax's trace-context setting; False if this jax does not have it."""
    from jax._src import config as jax_config

    setting = getattr(jax_config, "pallas_tpu_interpret_mode_context_manager", None)
    return setting is not None and setting.value is not None


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
    """Chunked GLA forward. q, k, gk: [B, T, H, K]; v: [B, T, H, V]; gk finite and <= 0.

    The wrapper pads T to a multiple of ``chunk_size`` and lays tensors out as [B, H, T, ·]
    so every block's last two dims are (rows, K or V), as Mosaic's tiling wants.

    Returns o [B, T, H, V] (v's dtype) and, with ``output_final_state``, the float32 final
    state [B, H, K, V]. ``interpret`` defaults to True on CPU; ``backend`` ("tpu" or "gpu")
    to the variant for the default device.
    """
    B, T, H, K = q.shape
    V = v.shape[-1]
    if k.shape != q.shape or gk.shape != q.shape or v.shape[:3] != q.shape[:3]:
        raise ValueError(f"shape mismatch: q{q.shape} k{k.shape} v{v.shape} gk{gk.shape}")
    if chunk_size <= 0 or chunk_size % SUB_CHUNK:
        raise ValueError(f"chunk_size must be a positive multiple of {SUB_CHUNK}")
    scale = K**-0.5 if scale is None else float(scale)
    if interpret is None and backend is None:
        # The variant is chosen where jax lowers, not where it traces: interpreted on CPU,
        # Mosaic for TPU, Triton for GPU. So `jax.export(..., platforms=["tpu"])` on a CPU
        # machine (ci-bench lower) checks the real TPU lowering.
        def variant(backend: Backend, interpret: bool) -> Callable[..., Any]:
            return lambda *xs: chunk_gla(
                *xs[:4],
                scale=scale,
                initial_state=xs[4] if len(xs) > 4 else None,
                output_final_state=output_final_state,
                chunk_size=chunk_size,
                interpret=interpret,
                backend=backend,
            )

        xs = (q, k, v, gk) if initial_state is None else (q, k, v, gk, initial_state)
        return lax.platform_dependent(
            *xs,
            cpu=variant("tpu" if tpu_interpreter_forced() else "gpu", True),
            tpu=variant("tpu", False),
            default=variant("gpu", False),
        )
    interpret = jax.default_backend() == "cpu" if interpret is None else interpret
    backend = default_backend() if backend is None else backend
    if backend not in ("tpu", "gpu"):
        raise ValueError(f"backend must be 'tpu' or 'gpu', got {backend!r}")
    C = chunk_size
    n_chunks = pl.cdiv(T, C)
    T_pad = n_chunks * C
    dtype = q.dtype  # matmul operand dtype; float32 inputs get float32 precision

    def to_bhtd(x: jax.Array) -> jax.Array:
        # Zero padding is inert: gk = 0 keeps the state, k = 0 adds nothing, o rows are cut.
        if T_pad != T:
            x = jnp.pad(x, ((0, 0), (0, T_pad - T), (0, 0), (0, 0)))
        return x.transpose(0, 2, 1, 3)

    args = [to_bhtd(q), to_bhtd(k), to_bhtd(v), to_bhtd(gk)]
    has_h0 = initial_state is not None
    if has_h0:
        args.append(initial_state.astype(F32).swapaxes(-1, -2))  # Sᵀ: [B, H, V, K]

    out_shape = [jax.ShapeDtypeStruct((B, H, T_pad, V), v.dtype)]
    if output_final_state:
        out_shape.append(jax.ShapeDtypeStruct((B, H, V, K), F32))
    cfg = _Config(C, n_chunks, has_h0, output_final_state, scale, dtype)
    sq = pl.squeezed
    cost = pl.CostEstimate(
        flops=gla_flops(B, T_pad, H, K, V, C),
        transcendentals=gla_transcendentals(B, T_pad, H, K, C),
        bytes_accessed=gla_bytes(
            B, T_pad, H, K, V, q.dtype.itemsize, n_states=has_h0 + output_final_state
        ),
    )

    if backend == "tpu":
        seq = lambda d: pl.BlockSpec((sq, sq, C, d), lambda b, h, t: (b, h, t, 0))  # noqa: E731
        state = pl.BlockSpec((sq, sq, V, K), lambda b, h, t: (b, h, 0, 0))
        call = pl.pallas_call(
            functools.partial(_tpu_kernel, cfg=cfg),
            out_shape=out_shape,
            grid=(B, H, n_chunks),
            in_specs=[seq(K), seq(K), seq(V), seq(K)] + [state] * has_h0,
            out_specs=[seq(V)] + [state] * output_final_state,
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
            out_specs=[seq(V)] + [state] * output_final_state,
            compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=2),
            cost_estimate=cost,
            interpret=interpret,
            name="chunk_gla_fwd",
        )

    outs = call(*args)
    o = outs[0].transpose(0, 2, 1, 3)[:, :T]
    if output_final_state:
        return o, outs[1].swapaxes(-1, -2)
    return o
