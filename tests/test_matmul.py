from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ci_bench.contract.spec import Case
from kernels.matmul import SPEC, BlockSizes, matmul_tiled, reference

SHAPES = [
    (1, 128, 128, 128),  # aligned, 2-D
    (1, 256, 384, 128),  # aligned, several K blocks
    (1, 127, 127, 127),  # specification's unaligned size
    (1, 513, 513, 513),  # specification's unaligned size
    (1, 127, 513, 255),  # every dimension unaligned and different
    (4, 128, 256, 128),  # batched
    (3, 33, 200, 17),  # batched and unaligned
]


@pytest.mark.parametrize("backend", ["tpu", "gpu"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B{}-M{}-K{}-N{}".format(*s))
def test_matches_reference_on_every_element(shape, dtype, backend):
    case = Case("matmul", dict(zip("BMKN", shape, strict=True)), dtype)
    a, b = SPEC.make_inputs(case, jax.random.PRNGKey(0))
    out = matmul_tiled(a, b, backend=backend)
    ref = reference(a, b)
    assert out.shape == ref.shape
    assert out.dtype == jnp.dtype(dtype)
    tol = SPEC.tolerances[dtype]
    np.testing.assert_allclose(
        np.asarray(out, np.float32), np.asarray(ref), atol=tol.atol, rtol=tol.rtol
    )


def test_float32_is_accurate_far_below_the_tolerance_on_cpu():
    case = Case("matmul", {"B": 1, "M": 127, "K": 513, "N": 255}, "float32")
    a, b = SPEC.make_inputs(case, jax.random.PRNGKey(1))
    err = jnp.max(jnp.abs(matmul_tiled(a, b) - reference(a, b)))
    assert float(err) < 1e-4


def test_custom_block_sizes_are_used_and_still_exact():
    case = Case("matmul", {"B": 1, "M": 200, "K": 300, "N": 260}, "float32")
    a, b = SPEC.make_inputs(case, jax.random.PRNGKey(2))
    out = matmul_tiled(a, b, block_sizes=BlockSizes(block_m=32, block_k=256, block_n=256))
    np.testing.assert_allclose(out, reference(a, b), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"block_m": 0}, "positive"),
        ({"block_m": 24}, "multiple of 16"),
        ({"block_k": 100}, "multiple of 128"),
        ({"block_n": 64}, "multiple of 128"),
    ],
)
def test_block_sizes_are_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BlockSizes(**kwargs)


def test_gpu_needs_power_of_two_blocks():
    a = jnp.ones((128, 128))
    with pytest.raises(ValueError, match="power of two"):
        matmul_tiled(a, a, block_sizes=BlockSizes(block_m=48), backend="gpu")


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [((4, 8), (9, 4)), ((2, 4, 8), (8, 4)), ((2, 4, 8), (3, 8, 4)), ((8,), (8,))],
)
def test_incompatible_shapes_are_rejected(a_shape, b_shape):
    with pytest.raises(ValueError, match="shapes"):
        matmul_tiled(jnp.ones(a_shape), jnp.ones(b_shape))


def test_cost_model_follows_the_specification():
    case = Case("matmul", {"B": 4, "M": 1024, "K": 512, "N": 256}, "bfloat16")
    assert SPEC.flops(case) == 2 * 4 * 1024 * 512 * 256
    assert SPEC.bytes_accessed(case) == 4 * (1024 * 512 + 512 * 256 + 1024 * 256) * 2
