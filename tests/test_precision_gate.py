"""The correctness gate on a platform whose float32 dots round their operands (issue 50):
on a TPU v5e the project's own float32 cases failed the gate, one element in 32,385, since
a DEFAULT-precision float32 dot there is one bfloat16 pass while the references are exact.
The float32 floor (``measure.correctness.float32_floor``) passes that rounding and still
fails a real bug. The TPU's arithmetic is emulated here: operands rounded to bfloat16,
products accumulated in float32, as jax's docs say a TPU does at DEFAULT precision."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from ci_bench.contract.spec import Tolerance
from ci_bench.measure.correctness import (
    check_gradient,
    check_output,
    float32_floor,
    incorrect,
)

MATMUL = Tolerance(atol=1e-2, rtol=1e-2)  # the project's matmul, float32


def _operands(m: int, k: int, n: int) -> tuple[jax.Array, jax.Array]:
    ka, kb = jax.random.split(jax.random.key(0))
    return jax.random.normal(ka, (m, k)), jax.random.normal(kb, (k, n))


def exact(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.dot(a, b, precision=jax.lax.Precision.HIGHEST)


def one_bfloat16_pass(a: jax.Array, b: jax.Array) -> jax.Array:
    """A TPU's float32 dot at DEFAULT precision: operands rounded, float32 accumulation."""
    return jnp.dot(
        a.astype(jnp.bfloat16), b.astype(jnp.bfloat16), preferred_element_type=jnp.float32
    )


def wrong_tile(out: jax.Array) -> jax.Array:
    """A kernel whose second 128-row tile reads the first one's offset."""
    return out.at[128:256].set(out[:128])


def unmasked_tail(out: jax.Array, a: jax.Array, tail: int) -> jax.Array:
    """A kernel whose last K tile is read past the end unmasked: ``tail`` rows of whatever
    lies beyond B (here: other data) are multiplied in."""
    beyond = jax.random.normal(jax.random.key(7), (tail, out.shape[1]))
    return out + a[:, -tail:] @ beyond


def test_the_floor_is_the_platforms_dot_roundoff_for_float32_alone():
    assert float32_floor("float32", "tpu") == 8 * 2.0**-8
    assert float32_floor("float32", "gpu") == 8 * 2.0**-11
    assert float32_floor("float32", "cpu") == 0.0
    assert float32_floor("bfloat16", "tpu") == 0.0  # its inputs are exact in bfloat16


@pytest.mark.parametrize("shape", [(127, 513, 255), (1024, 1024, 1024), (512, 4096, 512)])
def test_one_bfloat16_pass_fails_the_exact_rule_and_passes_the_tpu_floor(shape):
    a, b = _operands(*shape)
    out, ref = one_bfloat16_pass(a, b), exact(a, b)
    on_cpu = check_output(out, ref, MATMUL, float32_floor("float32", "cpu"))
    assert not on_cpu.ok  # what the chip showed: the rounding, read as a wrong kernel
    on_tpu = check_output(out, ref, MATMUL, float32_floor("float32", "tpu"))
    assert on_tpu.ok, incorrect(on_tpu)
    assert on_tpu.atol_scale is not None


def test_a_real_bug_still_fails_under_the_floor():
    a, b = _operands(1024, 1024, 1024)
    out, ref = one_bfloat16_pass(a, b), exact(a, b)
    floor = float32_floor("float32", "tpu")
    tile = check_output(wrong_tile(out), ref, MATMUL, floor)
    assert not tile.ok
    assert tile.mismatched > 100_000  # most of the misplaced tile, not a few elements
    assert "atol the float32 floor: 8 dot roundoffs" in incorrect(tile)
    tail = check_output(unmasked_tail(out, a, 127), ref, MATMUL, floor)
    assert not tail.ok


def test_gradients_get_the_same_floor():
    """dA of a matmul is dC @ B.T: one bfloat16 pass on a TPU, as the forward."""
    _, b = _operands(1024, 1024, 1024)
    dc = jax.random.normal(jax.random.key(1), (1024, 1024))
    got, want = one_bfloat16_pass(dc, b.T), exact(dc, b.T)
    assert not check_gradient(got, want, MATMUL).ok
    assert check_gradient(got, want, MATMUL, float32_floor("float32", "tpu")).ok
    assert not check_gradient(wrong_tile(got), want, MATMUL, float32_floor("float32", "tpu")).ok
