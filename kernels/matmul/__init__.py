"""Tiled matmul, version 0.12.0: the specification's worked example (``matmul_tiled``).

Benchmarked forward and backward: ``matmul`` is ``matmul_tiled`` with a ``custom_vjp``
whose backward is Pallas too (dA = g·Bᵀ, dB = Aᵀ·g: one call on a TPU since 0.5.0).

0.2.0 (measured on a TPU v5e, where 0.1.0's 128³ tiles ran 10-17x slower than XLA from
1024³ up: benchmarks/data/tpu_v5e_full_matmul_2026-12-05.csv): the default tiles are
(512, 512, 1024), each an upper bound (``BlockSizes.within``), a chip's tuned file first;
float32 operands make one bfloat16 MXU pass on a TPU, as XLA's DEFAULT precision does, and
accumulate in the float32 output block itself.

0.3.0 (on the same chip 0.2.0 ran 513³ at 1.6x and 16 x 128³ at 2.1x XLA's time, the
padding copies and one grid step per batch entry being most of it): nothing is padded, an
edge block is partial and the last K block is zeroed in the kernel; small problems fold
batch entries into one grid step (``kernel.batch_block``).

0.4.0 (on the same chip 0.3.0's backward at 1024³ bfloat16 ran 1.21x XLA's, its two
products tiled with the forward's tiles as given): the backward's tiles are per problem
dimension (``kernel.backward_tiles``: every block the shape of a forward one) and are tuned
on their own, the backward case's entry in the tuned file, else the forward's tiles.

0.5.0 (on the same chip 0.4.0's backward at 1024³ bfloat16 ran 1.10x XLA's, each of its two
calls ending on a write-back and starting on fetches nothing hid): the backward is one
Pallas call where the tiles divide the problem (``kernels.matmul.backward``), 1.02x there.

0.6.0: only the 128-wide strips that hold K's edge are masked; the aligned head of the last
K block multiplies unmasked (``kernel._tpu_kernel``; 0.5.0 selected every element of both
blocks, and a 513 K runs as one 640 block, so every grid step paid for it). On the same chip
this measured no change at the same tiles (B4 of 513³ float32, 40.1 µs before and after):
that case's 1.54x XLA's time was its tiling's, and the tuned file's (640, 640, 640), one
block per dimension and one batch entry per step, took it to 1.43x (docs/TPU.md).

0.7.0: the first contraction step wrote its product instead of adding it to a zeroed block,
and a contraction of one step wrote the output directly with no float32 accumulator. On the
same chip it measured no change (28 of 28 ci cases within -3.3 % and +2.0 % of 0.6.0's
baseline), and the model counted its body's VMEM up to 4 MiB apart from 0.6.0's (a product
in each of two branches; no staged left operand where a product is written directly), a
body its VMEM rules were never checked against the compiler on: 0.8.0 has 0.6.0's body.

0.8.0: a dimension one tile covers is one block of the whole dimension (513, not 640;
``BlockSizes.within``): a block as long as its axis is never partial, and Mosaic multiplies
unaligned blocks itself, so a 513 K needs no mask. On the same chip 0.6.0 ran 4 x 513³
float32 at (128, 640, 640) blocks, partial along every axis, in 39.6 µs, 5.2x one entry's
7.6 at the same blocks, where 4 x 1024³ bfloat16 ran in 3.3x one entry's time. The fused
backward takes such blocks too (A's transposed block may be all of M), so 513³ and 127³ at
tiles that cover them are one call. Measured against 0.7.0: 127³'s backward -25 %, the 513³
cases -5 to -14 %, the rest unchanged. What B4 of 513³ still loses to XLA is mostly not the
kernel's: XLA stores those arrays batch-minor and copies them to and from the row-major
layout a pallas_call takes, 8.8-9.0 µs a call (benchmarks/tpu_matmul_layouts.py).

0.9.0: a float32 forward whose arrays the chip stores batch-middle (its client's default
layout: ``f32[4|1, 513, 513]`` on a v5e) reads that layout itself, each batch entry DMAed
whole into VMEM (``kernels.matmul.entrywise``), so XLA copies nothing around it. On the same
chip, beside 0.8.0 with XLA's copies (benchmarks/tpu_matmul_batch_middle.py): B4-513³ 24.7
against 34.4 µs (XLA 22.3), B1-513³ 8.3 against 11.6 (XLA 10.0). bfloat16 arrays stored so
pack two entries' rows into one word; Mosaic refuses a DMA of one entry, so they, the
backward, and every array stored row-major run as 0.8.0 did.

0.10.0: the backward of such float32 arrays too: each entry's A, B and g DMAed whole into
VMEM, dA = g·Bᵀ and dB = Aᵀ·g, both DMAed back (``entrywise.entrywise_backward``; its VMEM
limit raised within the chip's budget, as the fused tiled backward's).

0.11.0: the DMA kernel keeps four entries in VMEM where they fit its budget (127³; 513³
keeps two), its reads three entries ahead of the multiply (``entrywise.depth``). On a TPU
v5e (benchmarks/tpu_matmul_entrywise_depth.py): B16-127³ forward 9.1 -> 6.1 µs (XLA 5.0),
backward 12.9 -> 9.1 (XLA 11.2); B4-127³ forward 2.5 -> 1.8 (XLA 1.7).

0.12.0: float32 arrays stored row-major whose every matrix is at least 1024 a side
(``entrywise.ROW_MAJOR_MIN``) take the DMA kernel too, each entry one contiguous copy, where
the chip's VMEM budget holds two entries (``entrywise.row_major_limit``): the fused tiled
backward at B16-1024³ float32 read the next entry while dB multiplied and wrote while the
next dA did, 1.25x XLA's time. On the same chip (benchmarks/tpu_matmul_whole_entry.py, the
tiled tuned tiles beside it): backward 591 -> 511 µs at B16, 151 -> 139 at B4; forward 304
-> 300 and 79 -> 77. bfloat16 (within 1.5 %) and 128³ (a tie) keep the tiles.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp

from ci_bench.spec import (
    Case,
    KernelSpec,
    MatrixProfile,
    Tolerance,
    Tunables,
    grid,
    points,
    tuned_config,
)
from kernels.matmul.backward import matmul, vmem_budget_of
from kernels.matmul.kernel import BlockSizes, matmul_tiled

__all__ = ["SPEC", "TUNABLES", "BlockSizes", "matmul", "matmul_tiled", "tiled"]

VERSION = "0.12.0"
# Where `ci-bench tune --write` keeps the tuned configs (this repository's baselines).
BASELINES = Path(__file__).resolve().parents[2] / "baselines"
DEFAULT_BLOCKS = dataclasses.asdict(BlockSizes())

_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def make_inputs(case: Case, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Normal operands; B=1 gives the 2-D form ``[M,K]x[K,N]`` of the specification.

    ``b`` is scaled by 1/sqrt(K) so outputs are O(1) for every K and a single absolute
    tolerance means the same thing across the matrix.
    """
    B, M, K, N = case["B"], case["M"], case["K"], case["N"]
    dtype = jnp.dtype(case.dtype)
    lead = () if B == 1 else (B,)
    key_a, key_b = jax.random.split(key)
    a = jax.random.normal(key_a, (*lead, M, K), jnp.float32)
    b = jax.random.normal(key_b, (*lead, K, N), jnp.float32) * K**-0.5
    return a.astype(dtype), b.astype(dtype)


def tiled(blocks: BlockSizes) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """The subject with these tiles: how the kernel takes a config (``Tunables.build``)."""

    def with_blocks(a: jax.Array, b: jax.Array) -> jax.Array:
        return matmul(a, b, blocks)

    return with_blocks


def pallas(a: jax.Array, b: jax.Array) -> jax.Array:
    """The subject: the tuned tilings of this shape on this process's TPU chip (the
    ``.tuned.<chip>.json`` beside the baselines, written by ``ci-bench tune --write``: the
    forward case's entry for the forward, the backward case's for the backward, else the
    forward's), else the default tiles, each cut to its dimension's share
    (``BlockSizes.within``). The fused backward may raise its VMEM limit within that chip's
    VMEM (``vmem_budget_of``); off a TPU (``ci-bench lower``) only within the scoped default
    every TPU has, so the program checked there fits them all."""
    from ci_bench.measure import chip as chips

    *lead, M, K = a.shape
    params = {"B": lead[0] if lead else 1, "M": M, "K": K, "N": b.shape[-1]}
    chip = chips.this_chip()
    where = {"directory": BASELINES, "tunables": TUNABLES, "chip": chip}
    forward = tuned_config("matmul", VERSION, params, a.dtype.name, default=DEFAULT_BLOCKS, **where)
    backward = tuned_config(
        "matmul", VERSION, params, a.dtype.name, default=forward, mode="backward", **where
    )
    budget = vmem_budget_of(chip)
    return matmul(a, b, BlockSizes(**forward), BlockSizes(**backward), budget)


# jax's matmul guide tiles as (bm, bk, bn); every tile a multiple of 128 fits Mosaic's
# (8, 128) layout for float32 and bfloat16 alike (docs/TUNE.md). A tile larger than its
# dimension is legal: it runs as the dimension's share, the same program as a smaller one.
SIZES = (128, 256, 512, 1024, 2048)
TUNABLES = Tunables(
    space={"block_m": SIZES, "block_k": SIZES, "block_n": SIZES},
    default=DEFAULT_BLOCKS,
    config=BlockSizes,
    build=tiled,
)


def reference(a: jax.Array, b: jax.Array) -> jax.Array:
    """Exact float32 product of the (already rounded) operands."""
    return jnp.matmul(
        a.astype(jnp.float32), b.astype(jnp.float32), precision=jax.lax.Precision.HIGHEST
    )


def flops(case: Case) -> int:
    """2·B·M·K·N (specification section 1.3). The backward modes derive theirs: two
    matmuls of the same size (dA, dB), 2x this."""
    return 2 * case["B"] * case["M"] * case["K"] * case["N"]


def bytes_accessed(case: Case) -> int:
    """(M·K + K·N + M·N)·itemsize per batch: each operand read once, the output written once.
    Backward (derived): this plus dA and dB written, (2·M·K + 2·K·N + M·N)·itemsize."""
    B, M, K, N = case["B"], case["M"], case["K"], case["N"]
    return B * (M * K + K * N + M * N) * _BYTES[case.dtype]


def _square(*sizes: int) -> list[dict[str, int]]:
    return [{"M": s, "K": s, "N": s} for s in sizes]


def _with_batch(batches: tuple[int, ...], shapes: list[dict[str, int]]) -> list[dict[str, int]]:
    return [{"B": b, **s} for b in batches for s in shapes]


DTYPES = ("float32", "bfloat16")
# Specification 2.2: small 128², medium 1024², large 4096², unaligned (127, 513); batch 1, 4, 16.
FULL = _with_batch((1, 4, 16), _square(128, 1024, 4096, 127, 513))
CI = points(
    _with_batch((1,), _square(128, 1024, 127, 513)),
    _with_batch((4,), _square(128, 513)),
    _with_batch((16,), _square(128)),
)
SMOKE = points(
    _with_batch((1,), _square(128)),
    _with_batch((1,), [{"M": 127, "K": 513, "N": 255}]),
    grid(B=(4,), M=(128,), K=(256,), N=(128,)),
)

# Backward cases: every profile times the VJP alone; full (releases) adds forward+backward,
# which a pull request need not pay for: it is close to forward + backward.
SPEC = KernelSpec(
    name="matmul",
    version=VERSION,
    pallas=pallas,
    native=jnp.matmul,
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    bytes_accessed=bytes_accessed,
    # float32: accumulation order differs (blocks vs XLA), and TPUs/GPUs run default-precision
    # f32 dots as bf16 passes / TF32, so 1e-2 on O(1) outputs; wrong tiling or padding gives
    # O(1) errors and is still caught. bfloat16: the output rounding alone is 2^-8 relative.
    tolerances={
        "float32": Tolerance(atol=1e-2, rtol=1e-2),
        "bfloat16": Tolerance(atol=2e-2, rtol=2e-2),
    },
    # Gradients use the same tolerances, their atol scaled by each gradient's RMS (dB grows
    # with sqrt(M)): a gradient from the wrong operand is off by O(RMS) and still caught.
    matrix={
        "full": MatrixProfile(FULL, DTYPES),
        "ci": MatrixProfile(CI, DTYPES, modes=("forward", "backward")),
        "smoke": MatrixProfile(SMOKE, DTYPES, modes=("forward", "backward")),
    },
    modes=("forward", "backward", "forward+backward"),
    shape_keys=("M", "K", "N"),
    shape_defaults={"B": 1},
    compute_unit="matrix",
    description="Pallas tiled matmul, float32 accumulation; Pallas backward (custom_vjp)",
    tunables=TUNABLES,
)
