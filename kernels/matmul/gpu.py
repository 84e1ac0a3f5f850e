"""The matmul's Triton tiling (GPUs): its own tiles, per dtype, never the TPU ones.

Grid programs run in parallel, so no state can cross grid steps: the grid is ``(B, M/bm,
N/bn)`` and each program loops over K blocks with ``fori_loop``, which Triton pipelines
``num_stages`` deep. Triton needs power-of-two loads, and the pipeline's buffers,
``num_stages x (bm·bk + bk·bn) x itemsize``, must fit the 227 KB a block may use on H100,
H200 and B200 (``GpuTiles.smem_bytes``; the CUDA programming guide's per-block opt-in maximum).
Transposed operands are transposed in XLA first, and every dimension is padded to whole blocks.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


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


def _gpu_kernel(a_ref, b_ref, o_ref, *, block_k: int):  # refs: [bm, Kp], [Kp, bn], [bm, bn]
    num_k = a_ref.shape[1] // block_k

    def body(k, acc):
        start = pl.multiple_of(k * block_k, block_k)
        a = a_ref[:, pl.ds(start, block_k)]
        b = b_ref[pl.ds(start, block_k), :]
        return acc + jnp.dot(a, b, preferred_element_type=jnp.float32)

    acc = jax.lax.fori_loop(0, num_k, body, jnp.zeros(o_ref.shape, jnp.float32))
    o_ref[...] = acc.astype(o_ref.dtype)


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


def _pad_to(x: jax.Array, rows: int, cols: int) -> jax.Array:
    """Zero-pad the last two axes of a 3-D array up to ``rows`` x ``cols``."""
    if x.shape[1:] == (rows, cols):
        return x
    return jnp.pad(x, ((0, 0), (0, rows - x.shape[1]), (0, cols - x.shape[2])))


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def gpu_matmul(
    a3,
    b3,
    tiles: GpuTiles,
    mkn: tuple[int, int, int],
    interpret: bool,
    transpose_a: bool,
    transpose_b: bool,
) -> jax.Array:
    """The Triton tiling on 3-D operands: transposes made in XLA, and M, N and K padded
    to whole blocks (Triton's power-of-2 rule is on what a kernel loads, one [bm, bk] /
    [bk, bn] step, not on the block a program is given); the result sliced back."""
    tiles.check_fits(jnp.dtype(a3.dtype).itemsize)
    a3 = jnp.swapaxes(a3, 1, 2) if transpose_a else a3
    b3 = jnp.swapaxes(b3, 1, 2) if transpose_b else b3
    M, K, N = mkn
    Mp, Np, Kp = (
        _round_up(M, tiles.block_m),
        _round_up(N, tiles.block_n),
        _round_up(K, tiles.block_k),
    )
    out = _gpu_call(_pad_to(a3, Mp, Kp), _pad_to(b3, Kp, Np), tiles, interpret)
    return out[:, :M, :N] if (Mp, Np) != (M, N) else out
