"""A TPU-only kernel that ships with jax, benchmarked unchanged: ``pallas.ops.tpu.matmul``.

It has no ``interpret`` argument: on a CPU it raises "Only interpret mode is supported on
CPU backend". This folder's ``pyproject.toml`` sets ``cpu-interpret = "tpu"``, so ci-bench
runs every ``pallas_call`` under jax's TPU interpreter on CPU, and compiles it for real on a
TPU. Nothing in ci-bench knows this module; the config names it:

    cd examples/tpu_matmul && ci-bench run            # or: ci-bench lower --platform tpu
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.matmul import matmul

from ci_bench.spec import Case, KernelSpec, MatrixProfile, Tolerance, grid

ITEMSIZE = {"float32": 4, "bfloat16": 2}


def pallas(x: jax.Array, y: jax.Array) -> jax.Array:
    return matmul(x, y, block_shape=(128, 128), block_k=128)


def make_inputs(case: Case, key: jax.Array) -> tuple[jax.Array, jax.Array]:
    kx, ky = jax.random.split(key)
    M, K, N = case["M"], case["K"], case["N"]
    x = jax.random.normal(kx, (M, K), jnp.float32)
    y = jax.random.normal(ky, (K, N), jnp.float32) * K**-0.5  # O(1) outputs for every K
    return x.astype(case.dtype), y.astype(case.dtype)


def reference(x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.matmul(x.astype(jnp.float32), y.astype(jnp.float32), precision="highest")


SPEC = KernelSpec(
    name="tpu_matmul",
    version="0.1.0",
    pallas=pallas,
    native=jnp.matmul,
    reference=reference,
    make_inputs=make_inputs,
    flops=lambda case: 2 * case["M"] * case["K"] * case["N"],
    bytes_accessed=lambda case: (
        (case["M"] * case["K"] + case["K"] * case["N"] + case["M"] * case["N"])
        * ITEMSIZE[case.dtype]
    ),
    tolerances={
        "float32": Tolerance(atol=1e-2, rtol=1e-2),
        "bfloat16": Tolerance(atol=2e-2, rtol=2e-2),
    },
    # Only smoke is declared: --profile ci / full fall back to it with a note.
    matrix={"smoke": MatrixProfile(grid(M=(256,), K=(256,), N=(128, 256)), ("float32",))},
    shape_keys=("M", "K", "N"),
    compute_unit="matrix",
    description="jax.experimental.pallas.ops.tpu.matmul, unchanged (TPU interpreter on CPU)",
)
