"""Pallas tiled matmul: ``[M,K]x[K,N]`` and batched ``[B,M,K]x[B,K,N]``, float32 accumulation.

Two lowerings, picked from the backend:

- ``tpu`` (also used for CPU interpret mode): grid ``(B/bb, M/bm, N/bn, K/bk)``; the K axis
  is the innermost, sequential ("arbitrary") axis and a float32 VMEM scratch accumulates
  across it, as in jax's ``pallas/ops/tpu/matmul.py``. Mosaic pipelines the block DMAs.
- ``gpu`` (Triton, ``kernels.matmul.gpu``): its own tiles, per dtype; chosen explicitly by
  its compiler params (with none, jax 0.10+ lowers a ``pallas_call`` through Mosaic GPU).

TPU tiles are upper bounds: each dimension is cut into as many blocks as the tile makes,
each its even share rounded up to 128 (``BlockSizes.within``), so 513 runs as two blocks of
384, never 1024; a dimension the tile covers is one block of the whole dimension (0.8.0),
513 wide, never partial. Nothing is padded or copied (0.3.0): an edge block past M or N is
partial (Pallas drops its writes), and the last block past K is zeroed in the kernel on that
step alone. Small problems fold batch entries into one step (``batch_block``): a grid step costs
about 0.2 µs on a TPU v5e, ten times a 128³ dot's MXU time. float32 operands make one
bfloat16 MXU pass on a TPU (XLA's DEFAULT precision there; interpreted on a CPU they stay
float32, as XLA's are), and a float32 output accumulates in its own VMEM block (no scratch).

``transpose_a`` / ``transpose_b`` multiply by a stored operand's transpose. The TPU tiling
reads the transposed blocks straight from the stored array (a ``[bk, bm]`` block of ``a``
transposed in VMEM, or a dot contracting ``b``'s last axis), so no transposed copy is made.
Float32 arrays the chip stores batch-middle take ``kernels.matmul.entrywise`` instead (the
forward since 0.9.0, the backward since 0.10.0): each entry DMAed whole, no relayout copies.
The differentiable op, ``matmul``, is in ``kernels.matmul.backward``: its backward is one
fused call on a TPU where the tiles divide the problem, else two of these matmuls.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Literal

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels.matmul import entrywise
from kernels.matmul.gpu import GpuTiles, gpu_matmul, gpu_tiles_of

Backend = Literal["tpu", "gpu"]


@dataclasses.dataclass(frozen=True)
class Blocks:
    """The blocks one problem runs with (``BlockSizes.within``): aligned shares of the
    tiles, or a whole dimension of any length."""

    block_m: int
    block_k: int
    block_n: int


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

    def within(self, M: int, K: int, N: int) -> Blocks:
        """The tiles this problem runs with: as many blocks per dimension as these tiles
        make, each the dimension's even share rounded up to 128 (16 for a block_m that is
        not a multiple of 128). A tile is an upper bound, so one default serves 127³ and
        4096³ alike: never more blocks, and 513 runs as two blocks of 384 (the edge block
        partial), not as 1024. A dimension the tile covers is one block of the whole
        dimension (a block as long as the array's axis is never partial, whatever its
        alignment): 513, not 640. On a TPU v5e 4 x 513³ ran 6-8 % faster so, forward and
        backward, and 127³'s backward became one call (docs/TPU.md)."""

        def share(tile: int, dim: int) -> int:
            if dim <= tile:
                return dim
            align = 128 if tile % 128 == 0 else 16
            return min(tile, round_up(-(-dim // -(-dim // tile)), align))

        return Blocks(share(self.block_m, M), share(self.block_k, K), share(self.block_n, N))


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


# refs: a [bb, bm, bk] ([bb, bk, bm] transposed), b [bb, bk, bn] ([bb, bn, bk] transposed),
# o [bb, bm, bn], and a float32 accumulator [bb, bm, bn] unless o is float32 itself.
def _tpu_kernel(
    a_ref,
    b_ref,
    o_ref,
    *scratch,
    transpose_a: bool,
    transpose_b: bool,
    one_pass: bool,
    k_tail: int,
):
    acc_ref = scratch[0] if scratch else o_ref
    k, last = pl.program_id(3), pl.num_programs(3) - 1

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    def product(a: jax.Array, b: jax.Array) -> jax.Array:
        if one_pass:  # float32 as XLA multiplies it on a TPU at DEFAULT: one bf16 pass
            a, b = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
        a = a.T if transpose_a else a
        contract_b = 1 if transpose_b else 0  # [bn, bk]: contract the last axis (NT)
        return jax.lax.dot_general(
            a, b, (((1,), (contract_b,)), ((), ())), preferred_element_type=jnp.float32
        )

    a_k, b_k = (0 if transpose_a else 1), (1 if transpose_b else 0)  # each block's K axis

    def accumulate(valid_k: int | None) -> None:
        for i in range(a_ref.shape[0]):  # the batch block, unrolled: one 2-D dot each
            if valid_k is None:
                acc_ref[i] += product(a_ref[i], b_ref[i])
                continue
            # The last K block reads past K: zero both operands there (0 x NaN is NaN), but
            # only in the 128-wide strips that hold the edge; the aligned head needs no mask.
            head = valid_k // 128 * 128
            if head:
                acc_ref[i] += product(
                    _k_slice(a_ref, i, a_k, 0, head), _k_slice(b_ref, i, b_k, 0, head)
                )
            a = _keep_leading(_k_slice(a_ref, i, a_k, head, None), a_k, valid_k - head)
            b = _keep_leading(_k_slice(b_ref, i, b_k, head, None), b_k, valid_k - head)
            acc_ref[i] += product(a, b)

    if k_tail:  # K is not a multiple of bk: only the last step pays for the mask
        pl.when(k < last)(lambda: accumulate(None))
        pl.when(k == last)(lambda: accumulate(k_tail))
    else:
        accumulate(None)

    if scratch:

        @pl.when(k == last)
        def _store():
            o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def _keep_leading(x: jax.Array, axis: int, n: int) -> jax.Array:
    """``x`` with every index >= ``n`` along ``axis`` zeroed (out-of-bounds block reads are
    unspecified on a TPU, NaN possibly: a select, not a multiply)."""
    index = jax.lax.broadcasted_iota(jnp.int32, x.shape, axis)
    return jnp.where(index < n, x, jnp.zeros_like(x))


def _k_slice(ref, entry: int, axis: int, start: int, stop: int | None) -> jax.Array:
    """Batch entry ``entry`` of a block, cut along its K ``axis`` (0 or 1) at 128-aligned
    bounds: a load of just that part, no copy of the rest."""
    cut = slice(start, stop)
    return ref[entry, cut, :] if axis == 0 else ref[entry, :, cut]


def batch_block(B: int, tile: BlockSizes, blocks: Blocks) -> int:
    """How many batch entries one grid step multiplies: the largest divisor of B whose
    blocks together hold no more elements than one tile of ``tile`` (a, b and the output).
    Small problems (B16 of 128³) then take a few steps, not one per entry: on a TPU v5e a
    grid step costs about 0.2 µs, ten times a 128³ dot's MXU time."""

    def elements(t: BlockSizes | Blocks) -> int:
        m, k, n = t.block_m, t.block_k, t.block_n
        return m * k + k * n + m * n

    fits = max(1, elements(tile) // elements(blocks))
    return max(d for d in range(1, min(B, fits) + 1) if B % d == 0)


def _tpu_call(
    a,
    b,
    blocks: Blocks,
    bb: int,
    K: int,
    interpret: bool,
    transpose_a: bool = False,
    transpose_b: bool = False,
) -> jax.Array:
    """Edge blocks past M or N are partial (Pallas drops their writes); past K they are
    zeroed in the kernel (``k_tail``): no operand is padded or copied."""
    from jax.experimental.pallas import tpu as pltpu

    B = a.shape[0]
    M = a.shape[2] if transpose_a else a.shape[1]
    N = b.shape[1] if transpose_b else b.shape[2]
    bm, bk, bn = blocks.block_m, blocks.block_k, blocks.block_n
    a_spec = (
        pl.BlockSpec((bb, bk, bm), lambda g, i, j, k: (g, k, i))
        if transpose_a
        else pl.BlockSpec((bb, bm, bk), lambda g, i, j, k: (g, i, k))
    )
    b_spec = (
        pl.BlockSpec((bb, bn, bk), lambda g, i, j, k: (g, j, k))
        if transpose_b
        else pl.BlockSpec((bb, bk, bn), lambda g, i, j, k: (g, k, j))
    )
    return pl.pallas_call(
        functools.partial(
            _tpu_kernel,
            transpose_a=transpose_a,
            transpose_b=transpose_b,
            one_pass=a.dtype == jnp.float32 and not interpret,
            k_tail=K % bk,
        ),
        out_shape=jax.ShapeDtypeStruct((B, M, N), a.dtype),
        grid=(B // bb, pl.cdiv(M, bm), pl.cdiv(N, bn), pl.cdiv(K, bk)),
        in_specs=[a_spec, b_spec],
        out_specs=pl.BlockSpec((bb, bm, bn), lambda g, i, j, k: (g, i, j)),
        scratch_shapes=[] if a.dtype == jnp.float32 else [pltpu.VMEM((bb, bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")
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


@functools.partial(
    jax.jit,
    static_argnames=(
        "block_sizes",
        "gpu_tiles",
        "backend",
        "interpret",
        "transpose_a",
        "transpose_b",
        "vmem_budget",
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
    vmem_budget: int | None = None,
) -> jax.Array:  # [M, N] or [B, M, N], dtype of a
    """Tiled matmul in Pallas (of ``aᵀ`` / ``bᵀ`` when asked); ``interpret`` defaults to
    True exactly on CPU. Not differentiable by itself: ``matmul`` is. The GPU variant takes
    ``gpu_tiles``, else (``backend="gpu"`` named) ``block_sizes`` as its tiles, else the
    dtype's default GPU tiles: TPU tilings never reach it from the platform branch. Within a
    ``vmem_budget`` (None: none given), large float32 entries stored row-major are DMAed
    whole instead (``entrywise.row_major_limit``)."""
    if a.ndim != b.ndim or a.ndim not in (2, 3):
        raise ValueError(
            f"expected shapes [M,K]x[K,N] or [B,M,K]x[B,K,N], got {a.shape} x {b.shape}"
        )
    a_shape, b_shape = _logical_shapes(a, b, transpose_a, transpose_b)
    if a_shape[-1] != b_shape[-2] or a_shape[:-2] != b_shape[:-2]:
        raise ValueError(f"incompatible shapes {a_shape} x {b_shape}")
    if a.dtype != b.dtype:
        raise ValueError(f"operand dtypes differ: {a.dtype} vs {b.dtype}")
    tile = block_sizes or BlockSizes()
    if backend is None and interpret is None:
        # Chosen where jax lowers, not where it traces: interpreted on CPU, Mosaic for TPU,
        # Triton for GPU (with its own tiles), so `jax.export(..., platforms=["tpu"])` on a
        # CPU machine (ci-bench lower) checks the real TPU lowering, and "cuda" the Triton one.
        def variant(backend: Backend, interpret: bool):
            return functools.partial(
                matmul_tiled,
                block_sizes=tile if backend == "tpu" else None,
                gpu_tiles=gpu_tiles if backend == "gpu" else None,
                backend=backend,
                interpret=interpret,
                transpose_a=transpose_a,
                transpose_b=transpose_b,
                vmem_budget=vmem_budget,
            )

        branches = {"cpu": variant("tpu", True), "tpu": variant("tpu", False)}
        branches["default"] = variant("gpu", False)
        return jax.lax.platform_dependent(a, b, **branches)
    backend = backend or default_backend()
    if interpret is None:
        interpret = jax.default_backend() == "cpu"
    batched = a.ndim == 3
    a3, b3 = (a, b) if batched else (a[None], b[None])
    M, K = a_shape[-2:]
    N = b_shape[-1]
    if backend == "gpu":
        if gpu_tiles is None and block_sizes is not None:
            gpu_tiles = GpuTiles(tile.block_m, tile.block_n, tile.block_k)
        out = gpu_matmul(
            a3,
            b3,
            gpu_tiles or gpu_tiles_of(a.dtype),
            (M, K, N),
            interpret,
            transpose_a,
            transpose_b,
        )
        return out if batched else out[0]
    if batched and not (transpose_a or transpose_b):
        if entrywise.applies(a, b):
            return entrywise.entrywise_matmul(a, b, interpret=interpret)  # no relayout copies
        entry = [(M, K), (K, N)], [(M, N)]
        limit = entrywise.row_major_limit(*entry, a.shape[0], a.dtype, vmem_budget)
        if limit is not None:  # whole entries, every copy in flight beside the multiply
            return entrywise.entrywise_matmul(
                a, b, interpret=interpret, vmem_limit=limit, batch_middle=False
            )
    blocks = tile.within(M, K, N)
    # A transposed block of a is [bk, bm]: its lane dimension bm must be a multiple of 128
    # on TPU, or all of M; another bm multiplies an XLA transpose instead.
    if transpose_a and blocks.block_m % 128 and blocks.block_m != M:
        a3, transpose_a = jnp.swapaxes(a3, 1, 2), False
    bb = batch_block(a3.shape[0], tile, blocks)
    out = _tpu_call(a3, b3, blocks, bb, K, interpret, transpose_a, transpose_b)
    return out if batched else out[0]
