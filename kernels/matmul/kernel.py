"""Pallas tiled matmul: ``[M,K]x[K,N]`` and batched ``[B,M,K]x[B,K,N]``, float32 accumulation.

Two lowerings of the same tiling, picked from the backend:

- ``tpu`` (also used for CPU interpret mode): grid ``(B, M/bm, N/bn, K/bk)``; the K axis is
  the innermost, sequential ("arbitrary") axis and a float32 VMEM scratch accumulates
  across it, as in jax's ``pallas/ops/tpu/matmul.py``. Mosaic pipelines the block DMAs.
- ``gpu`` (Triton): grid programs run in parallel, so no state can cross grid steps; the
  grid is ``(B, M/bm, N/bn)`` and each program loops over K blocks with ``fori_loop``.
  Triton needs power-of-two block shapes, so the padded K is a power-of-two number of
  blocks.

Unaligned shapes (127, 513, anything not a multiple of a block) are zero-padded up to the
blocks and the result is sliced back: zeros add nothing to a dot product, so every element
is exact. The padding costs one copy of each operand, only for unaligned shapes.
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
    """Tile sizes. TPU tiles are (sublane 8·2 for bf16, lane 128) aligned."""

    block_m: int = 128
    block_k: int = 128
    block_n: int = 128

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

    def check_backend(self, backend: Backend) -> None:
        """Triton lowers only power-of-two block shapes."""
        if backend == "gpu":
            for name in ("block_m", "block_k", "block_n"):
                if not _is_power_of_two(getattr(self, name)):
                    raise ValueError(f"{name}={getattr(self, name)} must be a power of two on GPU")


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _tpu_kernel(a_ref, b_ref, o_ref, acc_ref):  # refs: [bm, bk], [bk, bn], [bm, bn], f32 [bm, bn]
    k = pl.program_id(3)

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

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


def _tpu_call(a, b, blocks: BlockSizes, interpret: bool) -> jax.Array:
    from jax.experimental.pallas import tpu as pltpu

    B, M, K = a.shape
    N = b.shape[2]
    bm, bk, bn = blocks.block_m, blocks.block_k, blocks.block_n
    return pl.pallas_call(
        _tpu_kernel,
        out_shape=jax.ShapeDtypeStruct((B, M, N), a.dtype),
        grid=(B, M // bm, N // bn, K // bk),
        in_specs=[
            pl.BlockSpec((pl.squeezed, bm, bk), lambda g, i, j, k: (g, i, k)),
            pl.BlockSpec((pl.squeezed, bk, bn), lambda g, i, j, k: (g, k, j)),
        ],
        out_specs=pl.BlockSpec((pl.squeezed, bm, bn), lambda g, i, j, k: (g, i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")
        ),
        interpret=interpret,
    )(a, b)


def _gpu_call(a, b, blocks: BlockSizes, interpret: bool) -> jax.Array:
    B, M, K = a.shape
    N = b.shape[2]
    bm, bn = blocks.block_m, blocks.block_n
    return pl.pallas_call(
        functools.partial(_gpu_kernel, block_k=blocks.block_k),
        out_shape=jax.ShapeDtypeStruct((B, M, N), a.dtype),
        grid=(B, M // bm, N // bn),
        in_specs=[
            pl.BlockSpec((pl.squeezed, bm, K), lambda g, i, j: (g, i, 0)),
            pl.BlockSpec((pl.squeezed, K, bn), lambda g, i, j: (g, 0, j)),
        ],
        out_specs=pl.BlockSpec((pl.squeezed, bm, bn), lambda g, i, j: (g, i, j)),
        interpret=interpret,
    )(a, b)


def default_backend() -> Backend:
    """Triton lowering on GPUs; the TPU tiling elsewhere (interpreted on CPU)."""
    return "gpu" if jax.default_backend() == "gpu" else "tpu"


@functools.partial(jax.jit, static_argnames=("block_sizes", "backend", "interpret"))
def matmul_tiled(
    a: jax.Array,  # [M, K] or [B, M, K]
    b: jax.Array,  # [K, N] or [B, K, N]
    *,
    block_sizes: BlockSizes | None = None,
    backend: Backend | None = None,
    interpret: bool | None = None,
) -> jax.Array:  # [M, N] or [B, M, N], dtype of a
    """Tiled matmul in Pallas; ``interpret`` defaults to True exactly on CPU."""
    if a.ndim != b.ndim or a.ndim not in (2, 3):
        raise ValueError(
            f"expected shapes [M,K]x[K,N] or [B,M,K]x[B,K,N], got {a.shape} x {b.shape}"
        )
    if a.shape[-1] != b.shape[-2] or a.shape[:-2] != b.shape[:-2]:
        raise ValueError(f"incompatible shapes {a.shape} x {b.shape}")
    if a.dtype != b.dtype:
        raise ValueError(f"operand dtypes differ: {a.dtype} vs {b.dtype}")
    blocks = block_sizes or BlockSizes()
    if backend is None and interpret is None:
        # Chosen where jax lowers, not where it traces: interpreted on CPU, Mosaic for TPU,
        # Triton for GPU, so `jax.export(..., platforms=["tpu"])` on a CPU machine
        # (ci-bench lower) checks the real TPU lowering.
        def variant(backend: Backend, interpret: bool):
            return functools.partial(
                matmul_tiled, block_sizes=blocks, backend=backend, interpret=interpret
            )

        gpu_ok = all(
            _is_power_of_two(getattr(blocks, f)) for f in ("block_m", "block_k", "block_n")
        )
        branches = {"cpu": variant("tpu", True), "tpu": variant("tpu", False)}
        if gpu_ok:
            branches["default"] = variant("gpu", False)
        return jax.lax.platform_dependent(a, b, **branches)
    backend = backend or default_backend()
    blocks.check_backend(backend)
    if interpret is None:
        interpret = jax.default_backend() == "cpu"

    batched = a.ndim == 3
    a3, b3 = (a, b) if batched else (a[None], b[None])
    _, M, K = a3.shape
    N = b3.shape[2]
    Mp, Np = _round_up(M, blocks.block_m), _round_up(N, blocks.block_n)
    k_blocks = -(-K // blocks.block_k)
    if backend == "gpu":
        k_blocks = pl.next_power_of_2(k_blocks)
    Kp = k_blocks * blocks.block_k
    if (Mp, Kp) != (M, K):
        a3 = jnp.pad(a3, ((0, 0), (0, Mp - M), (0, Kp - K)))
    if (Kp, Np) != (K, N):
        b3 = jnp.pad(b3, ((0, 0), (0, Kp - K), (0, Np - N)))

    call = _gpu_call if backend == "gpu" else _tpu_call
    out = call(a3, b3, blocks, interpret)
    if (Mp, Np) != (M, N):
        out = out[:, :M, :N]
    return out if batched else out[0]
