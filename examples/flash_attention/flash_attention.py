"""jax's TPU ``flash_attention``, forward and backward, benchmarked from ONE SPEC.

``jax.experimental.pallas.ops.tpu.flash_attention`` ships a forward Pallas kernel and a
``custom_vjp`` whose backward is two more (dK/dV and dQ). It is used unchanged; nothing in
ci-bench knows this module. The SPEC declares the modes, so every case is timed as the
forward call, as the VJP alone (the residuals computed once, outside the timed region) and,
in ``ci``, as both in one call; every gradient is checked against ``jax.vjp`` of the float32
reference first. The inputs are declared as shapes (``input_specs``), so ``check-spec`` and
``lower`` trace without building arrays. On CPU it runs under jax's TPU interpreter
(``cpu-interpret = "tpu"`` in this folder's pyproject.toml):

    cd examples/flash_attention && ci-bench run          # or: ci-bench lower --platform tpu

Its block sizes are declared as tunables from jax's documented ``BlockSizes`` alone (the
forward's tiles searched, the backward's kept at jax's defaults), so ``ci-bench tune``
ranks them per TPU chip on a CPU:

    cd examples/flash_attention && ci-bench tune --chip v5e
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.flash_attention import BlockSizes, flash_attention

from ci_bench.spec import Case, KernelSpec, MatrixProfile, Tolerance, Tunables, divides, grid

ITEMSIZE = {"float32": 4, "bfloat16": 2}


def _dims(case: Case) -> tuple[int, int, int, int]:
    return case["B"], case["H"], case["T"], case["D"]


def input_specs(case: Case) -> tuple[jax.ShapeDtypeStruct, ...]:
    """q, k, v: [batch, heads, sequence, head dim], the kernel's layout."""
    shape = _dims(case)
    return tuple(jax.ShapeDtypeStruct(shape, jnp.dtype(case.dtype)) for _ in "qkv")


def make_inputs(case: Case, key: jax.Array) -> tuple[jax.Array, ...]:
    keys = jax.random.split(key, 3)
    shape = _dims(case)
    return tuple(jax.random.normal(k, shape, jnp.float32).astype(case.dtype) for k in keys)


def pallas(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    return flash_attention(q, k, v, sm_scale=q.shape[-1] ** -0.5)


# jax's BlockSizes.get_default: 128 everywhere, one batch row per block.
DEFAULT_BLOCKS = {"block_b": 1, "block_q": 128, "block_k_major": 128, "block_k": 128}
BACKWARD_BLOCKS = dict.fromkeys(
    (
        "block_q_major_dkv",
        "block_k_major_dkv",
        "block_k_dkv",
        "block_q_dkv",
        "block_k_major_dq",
        "block_k_dq",
        "block_q_dq",
    ),
    128,
)


def blocks(block_b: int, block_q: int, block_k_major: int, block_k: int) -> BlockSizes:
    """jax's own frozen BlockSizes (it refuses a block_k that does not divide block_k_major)."""
    return BlockSizes(
        block_b=block_b,
        block_q=block_q,
        block_k_major=block_k_major,
        block_k=block_k,
        **BACKWARD_BLOCKS,
    )


def with_blocks(block_sizes: BlockSizes):
    """The subject with these tiles: how the kernel takes a config."""

    def attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        return flash_attention(q, k, v, sm_scale=q.shape[-1] ** -0.5, block_sizes=block_sizes)

    return attention


TILES = (128, 256, 512, 1024)
TUNABLES = Tunables(
    space={"block_b": (1, 2), "block_q": TILES, "block_k_major": TILES, "block_k": TILES},
    default=DEFAULT_BLOCKS,
    config=blocks,
    build=with_blocks,
    constraints=(
        divides("block_b", "B"),
        divides("block_q", "T"),
        divides("block_k_major", "T"),
    ),
)


def _attention(q: jax.Array, k: jax.Array, v: jax.Array, precision=None) -> jax.Array:
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k, precision=precision) * q.shape[-1] ** -0.5
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", p.astype(v.dtype), v, precision=precision)


def native(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    """What one writes without Pallas: softmax attention in the inputs' dtype."""
    return _attention(q, k, v)


def reference(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    """Softmax attention in float32 at full matmul precision."""
    f32 = (x.astype(jnp.float32) for x in (q, k, v))
    return _attention(*f32, precision=jax.lax.Precision.HIGHEST)


def flops(case: Case) -> int:
    """Forward: QKᵀ and PV, 2·2·B·H·T²·D."""
    B, H, T, D = _dims(case)
    return 4 * B * H * T * T * D


def backward_flops(case: Case) -> int:
    """Backward, declared (not the 2x matmul rule): the kernels recompute QKᵀ and run four
    more matmuls (dV, dP, dQ, dK), 2.5x the forward, as FlashAttention counts it."""
    return 5 * flops(case) // 2


def bytes_accessed(case: Case) -> int:
    """q, k, v read and o written once."""
    B, H, T, D = _dims(case)
    return 4 * B * H * T * D * ITEMSIZE[case.dtype]


def backward_bytes(case: Case) -> int:
    """q, k, v, o, dO read and dQ, dK, dV written; the float32 row statistics l, m read."""
    B, H, T, D = _dims(case)
    return 8 * B * H * T * D * ITEMSIZE[case.dtype] + 2 * B * H * T * 4


SPEC = KernelSpec(
    name="flash_attention",
    version="0.1.0",
    pallas=pallas,
    native=native,
    reference=reference,
    make_inputs=make_inputs,
    input_specs=input_specs,
    flops=flops,
    bytes_accessed=bytes_accessed,
    backward_flops=backward_flops,
    backward_bytes=backward_bytes,
    # float32: accumulation order and the online softmax differ from the reference (~1e-6 in
    # the interpreter); 1e-2 leaves room for the MXU's float32 passes on a TPU. bfloat16:
    # output and the probabilities are rounded to bf16 (2^-8 relative) before PV.
    tolerances={
        "float32": Tolerance(atol=1e-2, rtol=1e-2),
        "bfloat16": Tolerance(atol=4e-2, rtol=4e-2),
    },
    modes=("forward", "backward", "forward+backward"),
    matrix={
        # the default BlockSizes are 128 everywhere: T must be a multiple of 128
        "smoke": MatrixProfile(
            grid(B=(1,), H=(2,), T=(256,), D=(64,)),
            ("float32", "bfloat16"),
            modes=("forward", "backward"),
        ),
        "ci": MatrixProfile(grid(B=(1, 2), H=(4,), T=(512,), D=(64, 128)), ("bfloat16",)),
    },
    shape_keys=("B", "H", "T", "D"),
    compute_unit="matrix",
    description="jax.experimental.pallas.ops.tpu.flash_attention, forward and backward",
    tunables=TUNABLES,
)
