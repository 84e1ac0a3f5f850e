"""Pallas tiled matmul: ``[M,K]x[K,N]`` and batched ``[B,M,K]x[B,K,N]``, float32 accumulation.

Two lowerings of the same tiling, picked from the backend:

- ``tpu`` (also used for CPU interpret mode): grid ``(B, M/bm, N/bn, K/bk)``; the K axis is
  the innermost, sequential ("arbitrary") axis and a float32 VMEM scratch accumulates
  across it, as in jax's ``pallas/ops/tpu/matmul.py``. Mosaic pipelines the block DMAs.
- ``gpu`` (Triton, chosen explicitly by its compiler params: with none, jax 0.10+ lowers a
  ``pallas_call`` through Mosaic GPU, which copies whole blocks into shared memory): grid
  programs run in parallel, so no state can cross grid steps; the grid is ``(B, M/bm,
  N/bn)`` and each program loops over K blocks with ``fori_loop``, which Triton pipelines
  ``num_stages`` deep. The GPU tiles are their own (``GpuTiles``, per dtype), never the TPU
  ones: Triton needs power-of-two loads, and the pipeline's buffers, ``num_stages x (bm·bk
  + bk·bn) x itemsize``, must fit the 227 KB a block may use on H100, H200 and B200
  (``GpuTiles.smem_bytes``; the CUDA programming guide's per-block opt-in maximum).

Tiles are upper bounds: each dimension is cut into as many blocks as the tile makes, each
its even share rounded up to 128 (``BlockSizes.within``), so 513 runs as one 640 block or
two of 384, never padded to 1024. float32 operands make one bfloat16 MXU pass on a TPU
(XLA's DEFAULT precision there; interpreted on a CPU they stay float32, as XLA's are), and
a float32 output accumulates in its own VMEM block (no scratch).

Unaligned shapes (127, 513, anything not a multiple of a block) are zero-padded up to the
blocks and the result is sliced back: zeros add nothing to a dot product, so every element
is exact. The padding costs one copy of each operand, only for unaligned shapes.

``transpose_a`` / ``transpose_b`` multiply by a stored operand's transpose. The TPU tiling
reads the transposed blocks straight from the stored array (a ``[bk, bm]`` block of ``a``
transposed in VMEM, or a dot contracting ``b``'s last axis), so no transposed copy is made;
the Triton tiling transposes in XLA first. ``matmul`` is the differentiable op: a
``custom_vjp`` whose backward is two of these matmuls, ``dA = g·Bᵀ`` and ``dB = Aᵀ·g``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Literal

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

Backend = Literal["tpu", "gpu"]


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


@dataclasses.dataclass(frozen=True)
class BlockSizes:
    """Tile sizes, upper bounds (``within``). TPU tiles are (sublane 8·2 for bf16, lane 128)
    aligned. The default fits v5e's 16 MiB scoped VMEM in float32 and bfloat16 alike."""

    block_m: int = 512
    block_k: int = 512
    block_n: int = 1024

    def __post_init__(self) -> None:
        for name in ("block_m", "block_k", "block_n"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.block_m % 16:
            raise ValueError(f"block_m must be a multiple of 16, got {self.block_m}")
        for name in ("block_k", "block_n"):
            if getattr(self, name) % 128:
                raise ValueError(f"{name} must be a multiple of 128, got {getattr(self, name)}")

    def within(self, M: int, K: int, N: int) -> BlockSizes:
        """The tiles this problem runs with: as many blocks per dimension as these tiles
        make, each the dimension's even share rounded up to 128 (16 for a block_m that is
        not a multiple of 128). A tile is an upper bound, so one default serves 127³ and
        4096³ alike: never more blocks, and 513 is padded to 640 (one 640 tile) or 768 (two
        of 384), not to 1024."""

        def share(tile: int, dim: int) -> int:
            align = 128 if tile % 128 == 0 else 16
            return min(tile, _round_up(-(-dim // -(-dim // tile)), align))

        return BlockSizes(share(self.block_m, M), share(self.block_k, K), share(self.block_n, N))


# Shared memory one thread block may use on the GPUs ci-bench targets (compute capability
# 9.0 and 10.0: CUDA C++ Programming Guide, "Technical Specifications per Compute Capability").
GPU_SMEM_PER_BLOCK = 227 * 1024


@dataclasses.dataclass(frozen=True)
class GpuTiles:
    """Triton tiles and launch parameters. Defaults: Triton's matmul tutorial's shape
    (128x128 output tiles, 4 warps), with bk halved for 4-byte operands so the pipeline's
    buffers stay at 96 KB in both dtypes."""

    block_m: int = 128
    block_n: int = 128
    block_k: int = 64
    num_warps: int = 4
    num_stages: int = 3

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n", "block_k", "num_warps", "num_stages"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        for name in ("block_m", "block_n", "block_k", "num_warps"):
            if not _is_power_of_two(getattr(self, name)):
                raise ValueError(f"{name}={getattr(self, name)} must be a power of two on GPU")

    def smem_bytes(self, itemsize: int) -> int:
        """Shared memory of Triton's software pipeline: ``num_stages`` copies of one K
        step's a and b tiles (the operands a dot reads from shared memory)."""
        return self.num_stages * (self.block_m + self.block_n) * self.block_k * itemsize

    def check_fits(self, itemsize: int) -> None:
        need = self.smem_bytes(itemsize)
        if need > GPU_SMEM_PER_BLOCK:
            raise ValueError(
                f"GPU tiles need {need:,} B of shared memory per block (num_stages x "
                f"(bm + bn) x bk x itemsize), past the {GPU_SMEM_PER_BLOCK:,} B a block may use"
            )


def gpu_tiles_of(dtype: jnp.dtype) -> GpuTiles:
    """The default GPU tiles of ``dtype``: bk 64 for 2-byte operands, 32 for 4-byte."""
    return GpuTiles(block_k=64 if jnp.dtype(dtype).itemsize <= 2 else 32)


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


# refs: a [bm, bk] ([bk, bm] transposed), b [bk, bn] ([bn, bk] transposed), o [bm, bn],
# and a float32 accumulator [bm, bn] unless o is float32 itself (then o accumulates).
def _tpu_kernel(
    a_ref, b_ref, o_ref, *scratch, transpose_a: bool, transpose_b: bool, one_pass: bool
):
    acc_ref = scratch[0] if scratch else o_ref
    k = pl.program_id(3)

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    a, b = a_ref[...], b_ref[...]
    if one_pass:  # float32 as XLA multiplies it on a TPU at DEFAULT: one bfloat16 pass
        a, b = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
    a = a.T if transpose_a else a
    contract_b = 1 if transpose_b else 0  # [bn, bk]: contract the last axis (an NT matmul)
    acc_ref[...] += jax.lax.dot_general(
        a, b, (((1,), (contract_b,)), ((), ())), preferred_element_type=jnp.float32
    )

    if scratch:

        @pl.when(k == pl.num_programs(3) - 1)
        def _store():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def _gpu_kernel(a_ref, b_ref, o_ref, *, block_k: int):  # refs: [bm, Kp], [Kp, bn], [bm, bn]
    num_k = a_ref.shape[1] // block_k

    def body(k, acc):
        start = pl.multiple_of(k * block_k, block_k)
        a = a_ref[:, pl.ds(start, block_k)]
        b = b_ref[pl.ds(start, block_k), :]
        return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)

    acc = jax.lax.fori_loop(0, num_k, body, jnp.zeros(o_ref.shape, jnp.float32))
    o_ref[...] = acc.astype(o_ref.dtype)


def _tpu_call(
    a, b, blocks: BlockSizes, interpret: bool, transpose_a: bool = False, transpose_b: bool = False
) -> jax.Array:
    from jax.experimental.pallas import tpu as pltpu

    B = a.shape[0]
    M, K = (a.shape[2], a.shape[1]) if transpose_a else (a.shape[1], a.shape[2])
    N = b.shape[1] if transpose_b else b.shape[2]
    bm, bk, bn = blocks.block_m, blocks.block_k, blocks.block_n
    a_spec = (
        pl.BlockSpec((pl.squeezed, bk, bm), lambda g, i, j, k: (g, k, i))
        if transpose_a
        else pl.BlockSpec((pl.squeezed, bm, bk), lambda g, i, j, k: (g, i, k))
    )
    b_spec = (
        pl.BlockSpec((pl.squeezed, bn, bk), lambda g, i, j, k: (g, j, k))
        if transpose_b
        else pl.BlockSpec((pl.squeezed, bk, bn), lambda g, i, j, k: (g, k, j))
    )
    return pl.pallas_call(
        functools.partial(
            _tpu_kernel,
            transpose_a=transpose_a,
            transpose_b=transpose_b,
            one_pass=a.dtype == jnp.float32 and not interpret,
        ),
        out_shape=jax.ShapeDtypeStruct((B, M, N), a.dtype),
        grid=(B, M // bm, N // bn, K // bk),
        in_specs=[a_spec, b_spec],
        out_specs=pl.BlockSpec((pl.squeezed, bm, bn), lambda g, i, j, k: (g, i, j)),
        scratch_shapes=[] if a.dtype == jnp.float32 else [pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")
        ),
        interpret=interpret,
    )(a, b)


def _gpu_call(a, b, tiles: GpuTiles, interpret: bool) -> jax.Array:
    from jax.experimental.pallas import triton as pltriton

    B, M, K = a.shape
    N = b.shape[2]
    bm, bn = tiles.block_m, tiles.block_n
    return pl.pallas_call(
        functools.partial(_gpu_kernel, block_k=tiles.block_k),
        out_shape=jax.ShapeDtypeStruct((B, M, N), a.dtype),
        grid=(B, M // bm, N // bn),
        in_specs=[
            pl.BlockSpec((pl.squeezed, bm, K), lambda g, i, j: (g, i, 0)),
            pl.BlockSpec((pl.squeezed, K, bn), lambda g, i, j: (g, 0, j)),
        ],
        out_specs=pl.BlockSpec((pl.squeezed, bm, bn), lambda g, i, j: (g, i, j)),
        compiler_params=pltriton.CompilerParams(
            num_warps=tiles.num_warps, num_stages=tiles.num_stages
        ),
        interpret=interpret,
    )(a, b)


def default_backend() -> Backend:
    """Triton lowering on GPUs; the TPU tiling elsewhere (interpreted on CPU)."""
    return "gpu" if jax.default_backend() == "gpu" else "tpu"


def _logical_shapes(
    a: jax.Array, b: jax.Array, transpose_a: bool, transpose_b: bool
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The operands' shapes as multiplied: ``[..., M, K]`` and ``[..., K, N]``."""
    a_shape = (*a.shape[:-2], a.shape[-1], a.shape[-2]) if transpose_a else a.shape
    b_shape = (*b.shape[:-2], b.shape[-1], b.shape[-2]) if transpose_b else b.shape
    return a_shape, b_shape


def _pad_to(x: jax.Array, rows: int, cols: int) -> jax.Array:
    """Zero-pad the last two axes of a 3-D array up to ``rows`` x ``cols``."""
    if x.shape[1:] == (rows, cols):
        return x
    return jnp.pad(x, ((0, 0), (0, rows - x.shape[1]), (0, cols - x.shape[2])))


@functools.partial(
    jax.jit,
    static_argnames=(
        "block_sizes",
        "gpu_tiles",
        "backend",
        "interpret",
        "transpose_a",
        "transpose_b",
    ),
)
def matmul_tiled(
    a: jax.Array,  # [M, K] or [B, M, K]; [K, M] / [B, K, M] with transpose_a
    b: jax.Array,  # [K, N] or [B, K, N]; [N, K] / [B, N, K] with transpose_b
    *,
    block_sizes: BlockSizes | None = None,
    gpu_tiles: GpuTiles | None = None,
    backend: Backend | None = None,
    interpret: bool | None = None,
    transpose_a: bool = False,
    transpose_b: bool = False,
) -> jax.Array:  # [M, N] or [B, M, N], dtype of a
    """Tiled matmul in Pallas (of ``aᵀ`` / ``bᵀ`` when asked); ``interpret`` defaults to
    True exactly on CPU. Not differentiable by itself: ``matmul`` is. The GPU variant takes
    ``gpu_tiles``, else (``backend="gpu"`` named) ``block_sizes`` as its tiles, else the
    dtype's default GPU tiles: TPU tilings never reach it from the platform branch."""
    if a.ndim != b.ndim or a.ndim not in (2, 3):
        raise ValueError(
            f"expected shapes [M,K]x[K,N] or [B,M,K]x[B,K,N], got {a.shape} x {b.shape}"
        )
    a_shape, b_shape = _logical_shapes(a, b, transpose_a, transpose_b)
    if a_shape[-1] != b_shape[-2] or a_shape[:-2] != b_shape[:-2]:
        raise ValueError(f"incompatible shapes {a_shape} x {b_shape}")
    if a.dtype != b.dtype:
        raise ValueError(f"operand dtypes differ: {a.dtype} vs {b.dtype}")
    blocks = block_sizes or BlockSizes()
    if backend is None and interpret is None:
        # Chosen where jax lowers, not where it traces: interpreted on CPU, Mosaic for TPU,
        # Triton for GPU (with its own tiles), so `jax.export(..., platforms=["tpu"])` on a
        # CPU machine (ci-bench lower) checks the real TPU lowering, and "cuda" the Triton one.
        def variant(backend: Backend, interpret: bool):
            return functools.partial(
                matmul_tiled,
                block_sizes=blocks if backend == "tpu" else None,
                gpu_tiles=gpu_tiles if backend == "gpu" else None,
                backend=backend,
                interpret=interpret,
                transpose_a=transpose_a,
                transpose_b=transpose_b,
            )

        branches = {"cpu": variant("tpu", True), "tpu": variant("tpu", False)}
        branches["default"] = variant("gpu", False)
        return jax.lax.platform_dependent(a, b, **branches)
    backend = backend or default_backend()
    tiles = None
    if backend == "gpu":
        if gpu_tiles is None and block_sizes is not None:
            gpu_tiles = GpuTiles(blocks.block_m, blocks.block_n, blocks.block_k)
        tiles = gpu_tiles or gpu_tiles_of(a.dtype)
        tiles.check_fits(jnp.dtype(a.dtype).itemsize)
    if tiles is None:
        blocks = blocks.within(a_shape[-2], a_shape[-1], b_shape[-1])
    bm, bk, bn = (
        (tiles.block_m, tiles.block_k, tiles.block_n)
        if tiles
        else (blocks.block_m, blocks.block_k, blocks.block_n)
    )
    if interpret is None:
        interpret = jax.default_backend() == "cpu"

    batched = a.ndim == 3
    a3, b3 = (a, b) if batched else (a[None], b[None])
    # A transposed block of a is [bk, bm]: its lane dimension bm must be a multiple of 128
    # on TPU. Triton, and smaller bm, multiply an XLA transpose instead.
    if transpose_a and (backend == "gpu" or bm % 128):
        a3, transpose_a = jnp.swapaxes(a3, 1, 2), False
    if transpose_b and backend == "gpu":
        b3, transpose_b = jnp.swapaxes(b3, 1, 2), False
    M, K = a_shape[-2:]
    N = b_shape[-1]
    # K is padded to whole blocks only: Triton's power-of-2 rule is on what a kernel loads
    # (one [bm, bk] / [bk, bn] step), not on the block a program is given.
    Mp, Np, Kp = _round_up(M, bm), _round_up(N, bn), _round_up(K, bk)
    a3 = _pad_to(a3, Kp, Mp) if transpose_a else _pad_to(a3, Mp, Kp)
    b3 = _pad_to(b3, Np, Kp) if transpose_b else _pad_to(b3, Kp, Np)

    if tiles is not None:
        out = _gpu_call(a3, b3, tiles, interpret)
    else:
        out = _tpu_call(a3, b3, blocks, interpret, transpose_a, transpose_b)
    if (Mp, Np) != (M, N):
        out = out[:, :M, :N]
    return out if batched else out[0]


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def matmul(
    a: jax.Array,  # [M, K] or [B, M, K]
    b: jax.Array,  # [K, N] or [B, K, N]
    block_sizes: BlockSizes | None = None,
) -> jax.Array:  # [M, N] or [B, M, N]
    """``matmul_tiled`` with a Pallas backward: ``jax.grad`` / ``jax.vjp`` run two tiled
    matmuls, ``dA = g·Bᵀ`` and ``dB = Aᵀ·g``, read from the stored operands."""
    return matmul_tiled(a, b, block_sizes=block_sizes)


def _matmul_fwd(a, b, block_sizes):
    return matmul_tiled(a, b, block_sizes=block_sizes), (a, b)


def _matmul_bwd(block_sizes, residuals, g):  # g: [.., M, N], the output's cotangent
    a, b = residuals
    g = g.astype(a.dtype)
    da = matmul_tiled(g, b, block_sizes=block_sizes, transpose_b=True)  # [M,N]x[N,K]
    db = matmul_tiled(a, g, block_sizes=block_sizes, transpose_a=True)  # [K,M]x[M,N]
    return da, db


matmul.defvjp(_matmul_fwd, _matmul_bwd)
