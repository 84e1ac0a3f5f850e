"""Benchmarking a third-party Pallas kernel: jax's own ``pallas.ops.gpu.softmax``.

Nothing in ci-bench knows this module. Run it with
``ci-bench run --kernel-module examples.jax_softmax --kernel jax_softmax``, or add
``"examples.jax_softmax"`` to ``kernels`` in ``[tool.ci-bench]``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.gpu.softmax import softmax

from ci_bench.spec import Case, KernelSpec, MatrixProfile, Tolerance, grid

_BYTES = {"float32": 4, "bfloat16": 2}


def pallas_softmax(x: jax.Array) -> jax.Array:
    # A Triton kernel: the Pallas interpreter on a CPU, compiled elsewhere. The choice is
    # made where jax lowers, not where it traces, so `ci-bench lower --platform cuda` on a
    # CPU machine checks the real Triton lowering.
    return jax.lax.platform_dependent(
        x,
        cpu=functools.partial(softmax, axis=-1, interpret=True),
        default=functools.partial(softmax, axis=-1, interpret=False),
    )


def make_inputs(case: Case, key: jax.Array) -> tuple[jax.Array]:
    return (jax.random.normal(key, (case["B"], case["R"], case["C"])).astype(case.dtype),)


def reference(x: jax.Array) -> jax.Array:
    return jax.nn.softmax(x.astype(jnp.float32), axis=-1)


def flops(case: Case) -> int:
    return 5 * case["B"] * case["R"] * case["C"]  # max, subtract, exp, sum, divide


def bytes_accessed(case: Case) -> int:
    return 2 * case["B"] * case["R"] * case["C"] * _BYTES[case.dtype]  # read x, write y


SPEC = KernelSpec(
    name="jax_softmax",
    version="0.10.2",
    pallas=pallas_softmax,
    native=lambda x: jax.nn.softmax(x, axis=-1),
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    bytes_accessed=bytes_accessed,
    tolerances={"float32": Tolerance(1e-6, 1e-5), "bfloat16": Tolerance(1e-2, 2e-2)},
    matrix={
        "smoke": MatrixProfile(grid(B=(1,), R=(64,), C=(256,)), ("float32", "bfloat16")),
        "ci": MatrixProfile(grid(B=(1, 4), R=(256,), C=(1024,)), ("float32", "bfloat16")),
        "full": MatrixProfile(
            grid(B=(1, 4, 16), R=(1024,), C=(1024, 4096)), ("float32", "bfloat16")
        ),
    },
    shape_keys=("B", "R", "C"),
    description="jax.experimental.pallas.ops.gpu.softmax, benchmarked as a third-party kernel",
)
