"""A memory-bound kernel: RMSNorm over the last axis, one row block per grid step.

About 4 FLOPs per element against 2 bytes moved per element and dtype byte: arithmetic
intensity ~1, far below any accelerator's ridge point, so HBM utilisation (not MFU) is the
figure that matters. ``compute_unit="vector"`` says its FLOPs run on the vector unit: MFU
stays null rather than measured against the matrix-unit peak. Run it with

    ci-bench run --kernel-module examples/rmsnorm.py --kernel rmsnorm
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ci_bench.spec import Case, KernelSpec, MatrixProfile, Tolerance, grid

EPS = 1e-6
BLOCK_ROWS = 8
ITEMSIZE = {"float32": 4, "bfloat16": 2}


def _kernel(x_ref, w_ref, o_ref):  # [rows, D], [1, D], [rows, D]
    x = x_ref[...].astype(jnp.float32)
    inv = jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + EPS)
    o_ref[...] = (x * inv * w_ref[...].astype(jnp.float32)).astype(o_ref.dtype)


def _call(x: jax.Array, w: jax.Array, interpret: bool) -> jax.Array:
    rows, d = x.shape
    return pl.pallas_call(
        _kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(pl.cdiv(rows, BLOCK_ROWS),),
        in_specs=[
            pl.BlockSpec((BLOCK_ROWS, d), lambda i: (i, 0)),
            pl.BlockSpec((1, d), lambda i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((BLOCK_ROWS, d), lambda i: (i, 0)),
        interpret=interpret,
    )(x, w[None, :])


def rmsnorm(x: jax.Array, w: jax.Array) -> jax.Array:
    """Interpreted on CPU, compiled for TPU/GPU: chosen where jax lowers (KERNEL_CONTRACT.md)."""
    return jax.lax.platform_dependent(
        x,
        w,
        cpu=functools.partial(_call, interpret=True),
        default=functools.partial(_call, interpret=False),
    )


def native(x: jax.Array, w: jax.Array) -> jax.Array:
    xf = x.astype(jnp.float32)
    inv = jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + EPS)
    return (xf * inv * w.astype(jnp.float32)).astype(x.dtype)


def reference(x: jax.Array, w: jax.Array) -> jax.Array:
    xf = x.astype(jnp.float32)
    return xf / jnp.sqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + EPS) * w.astype(jnp.float32)


def make_inputs(case: Case, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    kx, kw = jax.random.split(key)
    x = jax.random.normal(kx, (case["R"], case["D"]), jnp.float32)
    w = 1 + 0.1 * jax.random.normal(kw, (case["D"],), jnp.float32)
    return x.astype(case.dtype), w.astype(case.dtype)


def flops(case: Case) -> int:
    """Square, sum, scale by 1/rms, scale by w: ~4 per element."""
    return 4 * case["R"] * case["D"]


def bytes_accessed(case: Case) -> int:
    """x read and the output written once, plus w: (2·R·D + D)·itemsize."""
    return (2 * case["R"] * case["D"] + case["D"]) * ITEMSIZE[case.dtype]


SPEC = KernelSpec(
    name="rmsnorm",
    version="0.1.0",
    pallas=rmsnorm,
    native=native,
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    bytes_accessed=bytes_accessed,
    # float32: reduction order only. bfloat16: the output rounding, 2^-8 relative.
    tolerances={
        "float32": Tolerance(atol=1e-5, rtol=1e-5),
        "bfloat16": Tolerance(atol=2e-2, rtol=2e-2),
    },
    matrix={
        "smoke": MatrixProfile(grid(R=(64,), D=(256,)), ("float32", "bfloat16")),
        "ci": MatrixProfile(grid(R=(256, 1024), D=(512, 1024)), ("float32", "bfloat16")),
    },
    shape_keys=("R", "D"),
    compute_unit="vector",
    description="RMSNorm, a memory-bound example (HBM % is its headline)",
)
