"""The XLA operations around a case's kernels in the TPU cost model (issue 39).

A case times its whole function: a layout transpose before the kernel and a cast after it
move HBM bytes the kernel's own model never sees (tokamax's attention backward transposes
q, k, v, o and do, and reduces dq's partial sums, outside its kernel). Under perfect fusion
every array crossing between XLA and a kernel, an input or an output moves once; views
move nothing."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

from ci_bench.measure.model import analyze_case
from ci_bench.measure.model.chips import chip
from ci_bench.measure.model.outside import outside_bytes
from ci_bench.schema.model import CaseModel
from tests.test_model import ADHOC, _adhoc

N = 512
F32 = N * N * 4  # one (N, N) float32 array


def _double(x):
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def _make(case, key):
    return (jnp.ones((N, N), jnp.float32),)


def _model(fn) -> CaseModel:
    model = analyze_case(_adhoc(fn, _make), ADHOC, ["v5e"])
    assert model.status == "ok", model.reason
    return model


def _jaxpr(fn):
    return jax.make_jaxpr(fn)(jax.ShapeDtypeStruct((N, N), jnp.float32)).jaxpr


@pytest.mark.parametrize(
    ("fn", "moved"),
    [
        (_double, 0),  # the kernel alone
        (lambda x: _double(x.reshape(N * N).reshape(N, N)), 0),  # views move nothing
        (lambda x: _double(x.T), 2 * F32),  # the transpose reads x, writes x.T
        (lambda x: _double(jnp.exp(x.T) + 1), 2 * F32),  # fused: still x once, once out
        (lambda x: _double(x).T, 2 * F32),  # the result read once, its transpose written
        (lambda x: _double(x.T).T + x, 4 * F32),  # x read once, though used twice
        (lambda x: _double(x.astype(jnp.bfloat16)), F32 + F32 // 2),  # a real cast
        (lambda x: _double(jnp.zeros((N, N), jnp.float32) + x[0, 0]), F32 + 4),  # a slice: 4 B
        # platform_dependent runs its TPU branch, as the kernel walk does; its index is a scalar
        (
            lambda x: jax.lax.platform_dependent(x, tpu=lambda y: _double(y.T), default=_double),
            2 * F32,
        ),
    ],
)
def test_what_the_xla_operations_around_a_kernel_move(fn, moved):
    assert outside_bytes(_jaxpr(fn)) == moved


def test_the_outside_time_is_in_the_case_and_not_in_its_kernels():
    """The transpose before the kernel is its bytes at HBM bandwidth, added to the case's
    modelled time and said apart (``outside_us``); the call's own figures are unchanged."""
    alone, around = _model(_double), _model(lambda x: _double(x.T))
    v5e = chip("v5e")
    expected_us = 2 * F32 / v5e.model_hbm_bytes_per_s * 1e6
    assert around.outside_bytes == 2 * F32
    assert alone.outside_bytes == 0
    assert around.chips["v5e"].outside_us == pytest.approx(expected_us)
    assert around.chips["v5e"].modelled_us == pytest.approx(
        alone.chips["v5e"].modelled_us + expected_us
    )
    assert around.calls[0].chips["v5e"].modelled_us == alone.calls[0].chips["v5e"].modelled_us
    assert around.chips["v5e"].memory_us == alone.chips["v5e"].memory_us  # kernels' HBM only


def test_a_backward_case_counts_the_xla_operations_of_its_vjp():
    """jax.vjp of a kernel with a transpose around it: the backward pass's transpose of the
    cotangent is XLA work the backward case times."""

    @jax.custom_vjp
    def doubled(x):
        return _double(x)

    def forward(x):
        return doubled(x), None

    def backward(_, g):
        return (_double(g.T).T,)

    doubled.defvjp(forward, backward)
    fn = jax.jit(lambda x: jax.vjp(doubled, x)[1](x)[0])
    assert outside_bytes(_jaxpr(fn)) == 4 * F32  # g read, g.T written; result read, .T out


def test_a_partial_case_withholds_its_outside_time_too():
    """Issue 39: a partial case carries no time in any file; the XLA operations' time is
    one, so the analysis file's model nulls it with the rest (its bytes stay)."""
    from ci_bench.schema.withheld import WithheldModel

    around = _model(lambda x: _double(x.T))
    partial = around.model_copy(
        update={"status": "partial", "reason": "partial: x", "not_modelled": ["x"]}
    )
    written = WithheldModel.model_validate(partial.model_dump())
    assert written.outside_bytes == 2 * F32
    assert written.chips["v5e"].outside_us is None
    assert written.chips["v5e"].modelled_us is None
    whole = WithheldModel.model_validate(around.model_dump())
    assert whole.chips["v5e"].outside_us == around.chips["v5e"].outside_us
