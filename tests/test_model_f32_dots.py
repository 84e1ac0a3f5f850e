"""Float32 dots in the TPU cost model (issue 51, model revision 5).

How Mosaic feeds float32 operands to the MXU is libtpu's; revision 4 left a float32 x
float32 dot at DEFAULT precision unpriced (its case partial). Revision 5 prices every float32
dot from the chip's own microbenchmark (a 4096³ dot in 512³ tiles on a TPU v5e against the
same dot in bfloat16, benchmarks/tpu_microbench.py): float32 x float32 1.53 bf16 passes at
DEFAULT and 4.31 at HIGHEST, float32 x bfloat16 1.22; HIGH (which Mosaic refuses) keeps
XLA's 3. No case is partial for its dots' dtypes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

from ci_bench.measure.model import analyze_case
from ci_bench.measure.model.chips import chip
from tests.test_model import ADHOC, _adhoc

M = K = N = 512
FLOPS = 2 * M * K * N
F32, BF16 = jnp.float32, jnp.bfloat16


def _dot(precision, *, transposed_lhs: bool = False, when=None):
    """One (512, 512) x (512, 512) dot in a one-step kernel; ``transposed_lhs`` contracts
    the left operand's first dim (tokamax's ``x.T @ s``); ``when``: only at grid steps
    where it holds (grid of 2)."""
    dims = (((0,), (0,)), ((), ())) if transposed_lhs else (((1,), (0,)), ((), ()))

    def body(x_ref, y_ref, o_ref):
        def dot():
            o_ref[...] = jax.lax.dot_general(
                x_ref[...], y_ref[...], dims, precision=precision, preferred_element_type=F32
            )

        if when is None:
            dot()
        else:
            o_ref[...] = jnp.zeros_like(o_ref)
            pl.when(when(pl.program_id(0)))(dot)

    def fn(x, y):
        return pl.pallas_call(
            body,
            grid=(2,),
            in_specs=[pl.BlockSpec((M, K), lambda i: (0, 0))] * 2,
            out_specs=pl.BlockSpec((M, N), lambda i: (0, 0)),
            out_shape=jax.ShapeDtypeStruct((M, N), F32),
        )(x, y)

    return fn


def _model(fn, x_dtype=F32, y_dtype=F32):
    make = lambda c, key: (jnp.ones((M, K), x_dtype), jnp.ones((K, N), y_dtype))  # noqa: E731
    return analyze_case(_adhoc(fn, make), ADHOC, ["7x", "v5e"])


def _compute_us(passes: float, name: str = "v5e") -> float:
    return passes * 2 * FLOPS / chip(name).mxu_flops_per_s * 1e6


@pytest.mark.parametrize("precision", [None, jax.lax.Precision.DEFAULT])
@pytest.mark.parametrize("transposed_lhs", [False, True])
def test_a_float32_by_float32_dot_at_default_precision_is_priced_as_measured(
    precision, transposed_lhs
):
    model = _model(_dot(precision, transposed_lhs=transposed_lhs))
    assert model.status == "ok", model.reason
    assert not model.not_modelled
    assert "float32 x float32 dots at DEFAULT cost 1.53 bf16 MXU passes (measured, v5e)" in (
        model.notes
    )
    for name in ("7x", "v5e"):
        assert model.chips[name].compute_us == pytest.approx(_compute_us(1.53, name))
    assert model.flops == 2 * FLOPS  # two grid steps: FLOPs are the dot's, not the passes'
    assert model.hbm_bytes == 3 * M * N * 4


def test_a_float32_by_bfloat16_dot_is_priced_as_measured():
    model = _model(_dot(None), y_dtype=BF16)
    assert model.status == "ok", model.reason
    for name in ("7x", "v5e"):
        assert model.chips[name].compute_us == pytest.approx(_compute_us(1.22, name))


@pytest.mark.parametrize(("precision", "passes"), [("HIGH", 3), ("HIGHEST", 4.31)])
def test_a_float32_dot_at_an_explicit_precision_is_timed_at_its_passes(precision, passes):
    model = _model(_dot(getattr(jax.lax.Precision, precision)))
    assert model.status == "ok", model.reason
    assert f"float32 x float32 dots at {precision} cost {passes:g} bf16 MXU passes" in " ".join(
        model.notes
    )
    assert model.chips["v5e"].compute_us == pytest.approx(_compute_us(passes))


def test_a_bfloat16_dot_is_one_pass():
    model = _model(_dot(None), x_dtype=BF16, y_dtype=BF16)
    assert model.status == "ok", model.reason
    assert model.chips["v5e"].compute_us == pytest.approx(_compute_us(1.0))


def test_a_float32_dot_in_a_branch_counts_at_the_steps_that_run_it():
    """``pl.when`` on program ids counts a branch at the steps it runs."""
    never = _model(_dot(None, when=lambda i: i > 5))
    assert never.status == "ok", never.reason
    assert never.flops == 0
    once = _model(_dot(None, when=lambda i: i == 1))
    assert once.status == "ok", once.reason
    assert once.flops == FLOPS
    assert once.chips["v5e"].compute_us == pytest.approx(_compute_us(1.53) / 2)
