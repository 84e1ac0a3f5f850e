"""The MXU's shape and nested conditionals in the TPU cost model (issue 39).

A dot narrower than the systolic array occupies all of it (the scaling book; jax's chip
table gives the array's width: 128 before v6e, 256 from it), and a ``pl.when`` nested in
another is weighed over the steps that reach it (an init and an accumulate branch under a
stage conditional are one dot, not two)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

from ci_bench.measure.model import analyze_case
from ci_bench.measure.model.body import MXU_PADDING_NOTE
from ci_bench.measure.model.chips import chip
from tests.test_model import ADHOC, _adhoc


def _one_dot(x, y):
    def body(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    m, n = x.shape[0], y.shape[1]
    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32))(x, y)


@pytest.mark.parametrize(("m", "k", "n"), [(512, 64, 512), (512, 512, 64), (512, 512, 512)])
def test_a_dot_narrower_than_the_mxu_is_charged_the_whole_array(m, k, n):
    """k = 64 or n = 64: a quarter of 7x's 256-wide array, half of v5e's 128-wide one; the
    logical FLOPs (and so the MFU) stay 2·m·k·n."""
    make = lambda c, key: (jnp.ones((m, k), jnp.bfloat16), jnp.ones((k, n), jnp.bfloat16))  # noqa: E731
    model = analyze_case(_adhoc(_one_dot, make), ADHOC, ["7x", "v5e"])
    assert model.status == "ok", model.reason
    assert model.flops == 2 * m * k * n
    for name, width in (("7x", 256), ("v5e", 128)):
        pad = lambda d, w=width: -(-d // w) * w  # noqa: E731
        charged = 2 * m * pad(k) * pad(n)
        assert model.chips[name].compute_us == pytest.approx(
            charged / chip(name).mxu_flops_per_s * 1e6
        )
    narrow = min(k, n) < 256
    assert (MXU_PADDING_NOTE in model.notes) is narrow


def _staged(x, y, *, nested_on_the_same_id: bool = False):
    """Grid (stage, h) = (2, 4): in stage 0 an init dot at h == 0 and an accumulate dot
    after it, as tokamax's fused-loss backward nests them (``nested_on_the_same_id``: the
    outer conditional is ``h == 0`` too, so the inner one is true wherever it is reached)."""

    def body(x_ref, y_ref, o_ref):
        stage, h = pl.program_id(0), pl.program_id(1)
        outer = (h == 0) if nested_on_the_same_id else (stage == 0)

        @pl.when(outer)
        def _():
            @pl.when(h == 0)
            def _():
                o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

            @pl.when(h != 0)
            def _():
                o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    spec = pl.BlockSpec((128, 128), lambda s, h: (0, 0))
    return pl.pallas_call(
        body,
        grid=(2, 4),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct((128, 128), jnp.float32),
    )(x, y)


@pytest.mark.parametrize(("same_id", "dots"), [(False, 4), (True, 2)])
def test_a_nested_pl_when_is_weighed_over_the_steps_that_reach_it(same_id, dots):
    """Stage 0's four steps run one dot each (not the init's and the accumulate's both);
    ``h == 0`` inside ``h == 0`` runs at its two steps (not 2/8 of 2/8 of the grid)."""
    make = lambda c, key: (jnp.ones((128, 128), jnp.bfloat16),) * 2  # noqa: E731

    def fn(x, y):
        return _staged(x, y, nested_on_the_same_id=same_id)

    model = analyze_case(_adhoc(fn, make), ADHOC, ["v5e"])
    assert model.status == "ok", model.reason
    assert model.flops == dots * 2 * 128**3
