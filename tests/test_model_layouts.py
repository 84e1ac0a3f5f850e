"""The chip's stored layouts in the TPU cost model's XLA operations (model revision 9).

On a TPU v5e XLA stores ``f32[4, 513, 513]`` batch-middle (``{2,0,1:T(4,128)}``): a
``swapaxes`` to ``[M, B, K]`` reads the same bytes row-major and is a bitcast (matmul 0.9.0:
the chip compiled it with no copy), which the model counted as a transpose moving every
byte (52.9 µs modelled against 24.9 measured; "📐 +163 %" on the version step). The copies
XLA stages in VMEM around a kernel that takes such an array as it is stay uncounted."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

from ci_bench.measure.chip import stored_layouts
from ci_bench.measure.model import analyze_case
from ci_bench.measure.model.layouts import (
    parse_major_to_minor,
    read_as_bitcast,
    written_as_bitcast,
)
from ci_bench.measure.model.outside import outside_bytes
from kernels.matmul import entrywise
from kernels.matmul.kernel import matmul_tiled
from tests.test_model import ADHOC, _adhoc

B, M = 4, 136
ENTRY = B * M * M * 4  # one f32[B, M, M]


def _batch_middle(shape, dtype):
    """What the v5e answered for f32[4|16, 127|513, …]: the batch second minor."""
    return (1, 0, 2) if len(shape) == 3 and shape[0] > 1 else tuple(range(len(shape)))


def _row_major(shape, dtype):
    return tuple(range(len(shape)))


@pytest.mark.parametrize(
    ("printed", "order"),
    [
        ("{2,0,1:T(4,128)}", (1, 0, 2)),
        ("{2,1,0:T(8,128)(2,1)}", (0, 1, 2)),
        ("{1,3,2,0:T(8,128)}", (0, 2, 3, 1)),
        ("{0}", (0,)),
        ("not a layout", None),
    ],
)
def test_a_printed_layout_lists_its_dimensions_minor_to_major(printed, order):
    assert parse_major_to_minor(printed) == order


def test_unit_dimensions_sit_anywhere_at_no_cost():
    assert read_as_bitcast((1, 0, 2), (1, 0, 2), (4, 513, 513))
    assert read_as_bitcast((0, 1, 2), (1, 0, 2), (1, 513, 513))  # f32[1, 513, 513] {2,0,1}
    assert not read_as_bitcast((0, 2, 1), (1, 0, 2), (1, 513, 513))
    assert not read_as_bitcast((0, 2, 1), (1, 0, 2), (4, 513, 513))
    # [B, H, T, K] made row-major, returned as [B, T, H, K] stored (0, 2, 1, 3): a bitcast
    assert written_as_bitcast((0, 2, 1, 3), (0, 2, 1, 3), (2, 4, 64, 8))
    assert not written_as_bitcast((0, 2, 1, 3), (0, 1, 2, 3), (2, 4, 64, 8))


def _double(x):
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def _jaxpr(fn):
    return jax.make_jaxpr(fn)(jax.ShapeDtypeStruct((B, M, M), jnp.float32)).jaxpr


@pytest.mark.parametrize(
    ("fn", "row_major", "batch_middle"),
    [
        (_double, 0, 0),  # XLA's copies in and out, staged in VMEM: not counted
        (lambda x: jnp.swapaxes(_double(jnp.swapaxes(x, 0, 1)), 0, 1), 4 * ENTRY, 0),
        (lambda x: jnp.swapaxes(_double(jnp.swapaxes(x, 0, 1)), 1, 2), 4 * ENTRY, 2 * ENTRY),
        (lambda x: _double(jnp.swapaxes(x, 1, 2)), 2 * ENTRY, 2 * ENTRY),  # a real transpose
        (lambda x: _double(x + 1), 2 * ENTRY, 2 * ENTRY),  # fused: read as stored
    ],
)
def test_a_transpose_that_is_a_bitcast_of_the_stored_bytes_moves_nothing(
    fn, row_major, batch_middle
):
    jaxpr = _jaxpr(fn)
    assert outside_bytes(jaxpr) == row_major
    assert outside_bytes(jaxpr, _row_major) == row_major
    assert outside_bytes(jaxpr, _batch_middle) == batch_middle


def _matmul_jaxpr(monkeypatch, dma: bool):
    stored = {(B, M, M)} if dma else set()
    monkeypatch.setattr(entrywise, "stored_batch_middle", lambda shape, dtype: shape in stored)
    jax.clear_caches()
    arg = jax.ShapeDtypeStruct((B, M, M), jnp.float32)
    fn = lambda a, b: matmul_tiled(a, b, backend="tpu", interpret=True)  # noqa: E731
    return jax.make_jaxpr(fn)(arg, arg).jaxpr


def test_the_projects_dma_matmul_moves_nothing_outside_its_kernel_on_the_chip(monkeypatch):
    """0.9.0's DMA kernel: three swaps (A, B in; the product out), each a bitcast where the
    chip stores them batch-middle, once counted as transposes moving every byte."""
    tiled, dma = _matmul_jaxpr(monkeypatch, dma=False), _matmul_jaxpr(monkeypatch, dma=True)
    assert outside_bytes(tiled) == outside_bytes(tiled, _batch_middle) == 0
    assert outside_bytes(dma) == outside_bytes(dma, _row_major) == 6 * ENTRY
    assert outside_bytes(dma, _batch_middle) == 0


def test_the_case_model_reads_the_layouts_it_is_given():
    case_fn = lambda x: jnp.swapaxes(_double(jnp.swapaxes(x, 0, 1)), 0, 1)  # noqa: E731
    make = lambda case, key: (jnp.ones((B, M, M), jnp.float32),)  # noqa: E731
    spec = _adhoc(case_fn, make)
    plain = analyze_case(spec, ADHOC, ["v5e"])
    laid = analyze_case(spec, ADHOC, ["v5e"], layouts=_batch_middle)
    assert (plain.status, laid.status) == ("ok", "ok"), (plain.reason, laid.reason)
    assert (plain.outside_bytes, laid.outside_bytes) == (4 * ENTRY, 0)
    assert laid.chips["v5e"].modelled_us < plain.chips["v5e"].modelled_us


def test_off_a_tpu_the_model_takes_every_array_row_major():
    assert stored_layouts() is None
