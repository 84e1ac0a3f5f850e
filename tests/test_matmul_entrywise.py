"""The float32 matmul that reads XLA's batch-middle layout by DMA (``kernels.matmul.entrywise``):
interpreted here; which arrays take it is the chip's answer, faked only at that edge."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kernels.matmul import entrywise
from kernels.matmul.kernel import matmul_tiled


@pytest.fixture(autouse=True)
def _fresh_traces():
    """matmul_tiled's traces ask the chip's layouts: none made under a faked answer outlives
    its test."""
    yield
    jax.clear_caches()


def _operands(B: int, M: int, K: int, N: int, seed: int = 0):
    keys = jax.random.split(jax.random.PRNGKey(seed))
    a = jax.random.normal(keys[0], (B, M, K), jnp.float32)
    b = jax.random.normal(keys[1], (B, K, N), jnp.float32) * K**-0.5
    return a, b


@pytest.mark.parametrize(
    ("layout", "middle"),
    [
        ("{2,0,1:T(4,128)}", True),  # f32[4,513,513] on a v5e
        ("{2,0,1:T(1,128)}", True),  # f32[1,513,513]
        ("{2,0,1:T(4,128)(2,1)}", True),  # bf16[4,513,513]
        ("{2,1,0:T(8,128)}", False),  # row-major
        ("{2,1,0:T(8,128)(2,1)}", False),
        ("{1,0:T(8,128)}", False),  # rank 2
        ("{0,2,1}", False),
        ("", False),
    ],
)
def test_a_layout_is_batch_middle_when_its_minor_to_major_order_starts_2_0(layout, middle):
    assert entrywise.is_batch_middle(layout) is middle


@pytest.mark.parametrize("shape", [(4, 37, 300, 130), (1, 40, 129, 7), (3, 16, 128, 256)])
def test_every_entry_is_multiplied_exactly(shape):
    B, M, _, N = shape
    a, b = _operands(*shape)
    out = entrywise.entrywise_matmul(a, b, interpret=True)
    want = jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)
    assert out.shape == (B, M, N)
    np.testing.assert_allclose(np.asarray(out), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_an_entry_fits_when_its_matrices_twice_and_the_dots_temporaries_fit_the_budget():
    assert entrywise.fits(513, 513, 513)  # about 10.2 MiB: the v5e case measured
    assert not entrywise.fits(1025, 1025, 1025)  # about 36 MiB
    assert not entrywise.fits(8, 1 << 20, 8)  # a's rows alone 32 MiB a copy, b's far more


@pytest.mark.parametrize("batch_middle", [True, False])
@pytest.mark.parametrize(("batch", "buffers"), [(2, None), (3, None), (5, 3), (4, 4), (3, 1)])
def test_no_buffer_is_reused_before_its_dma_completed(batch, buffers, batch_middle):
    """jax's TPU interpreter executing each DMA only when it is waited on: a buffer read or
    overwritten before its copy was waited for gives a wrong (NaN) product here; with more
    buffers the reads run further ahead, into slots freed entries before. Entries read from
    row-major arrays (``batch_middle=False``: one contiguous copy each) alike."""
    from jax.experimental.pallas import tpu as pltpu

    strict = pltpu.InterpretParams(detect_races=True, dma_execution_mode="on_wait")
    a, b = _operands(batch, 24, 136, 40, seed=6)
    g = jax.random.normal(jax.random.PRNGKey(7), (batch, 24, 40), jnp.float32)
    hi = jax.lax.Precision.HIGHEST
    options = {"interpret": strict, "buffers": buffers, "batch_middle": batch_middle}
    out = entrywise.entrywise_matmul(a, b, **options)
    da, db = entrywise.entrywise_backward(a, b, g, vmem_limit=64 << 20, **options)
    wants = (
        jnp.matmul(a, b, precision=hi),
        jnp.matmul(g, jnp.swapaxes(b, 1, 2), precision=hi),
        jnp.matmul(jnp.swapaxes(a, 1, 2), g, precision=hi),
    )
    for got, want in zip((out, da, db), wants, strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(jax.default_backend() == "tpu", reason="a TPU answers for itself")
def test_off_a_tpu_no_array_is_stored_batch_middle():
    assert not entrywise.stored_batch_middle((4, 513, 513), jnp.float32)


def _stored_so(monkeypatch, middle: set[tuple[int, ...]]) -> None:
    """The chip's answer for each shape, at the one edge that asks it."""
    monkeypatch.setattr(
        entrywise, "stored_batch_middle", lambda shape, dtype: tuple(shape) in middle
    )
    jax.clear_caches()  # matmul_tiled's traces asked the chip before


def _takes_dma(fn, *args) -> bool:
    """Whether the traced program runs the DMA kernel (else the tiled one, a pallas_call too)."""
    text = str(jax.make_jaxpr(fn)(*args))
    assert "pallas_call" in text
    return "name=entrywise_matmul" in text


def test_the_matmul_takes_the_dma_kernel_only_when_every_array_is_stored_batch_middle(
    monkeypatch,
):
    a, b = _operands(2, 24, 136, 40, seed=1)
    tiled = lambda x, y: matmul_tiled(x, y, backend="tpu", interpret=True)  # noqa: E731
    _stored_so(monkeypatch, {(2, 24, 136), (2, 136, 40), (2, 24, 40)})
    assert _takes_dma(tiled, a, b)
    out = jax.jit(tiled)(a, b)
    want = jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)
    np.testing.assert_allclose(np.asarray(out), np.asarray(want), rtol=1e-5, atol=1e-5)
    for row_major in ((2, 24, 136), (2, 136, 40), (2, 24, 40)):  # one stored so: copies
        _stored_so(monkeypatch, {(2, 24, 136), (2, 136, 40), (2, 24, 40)} - {row_major})
        assert not _takes_dma(tiled, a, b)


def test_bfloat16_and_transposed_operands_keep_the_tiled_kernel(monkeypatch):
    a, b = _operands(2, 24, 136, 40, seed=2)
    _stored_so(monkeypatch, {(2, 24, 136), (2, 136, 40), (2, 24, 40), (2, 40, 136)})
    half = lambda x, y: matmul_tiled(x, y, backend="tpu", interpret=True)  # noqa: E731
    assert not _takes_dma(half, a.astype(jnp.bfloat16), b.astype(jnp.bfloat16))
    nt = lambda x, y: matmul_tiled(x, y, backend="tpu", interpret=True, transpose_b=True)  # noqa: E731
    assert not _takes_dma(nt, a, jnp.swapaxes(b, 1, 2))
    tiled = lambda x, y: matmul_tiled(x, y, backend="tpu", interpret=True)  # noqa: E731
    assert _takes_dma(tiled, a, b)  # the same float32 operands, untransposed: the DMA kernel


@pytest.mark.parametrize("shape", [(3, 37, 300, 130), (1, 40, 129, 7)])
def test_the_backward_gives_both_gradients_of_every_entry_exactly(shape):
    B, M, _, N = shape
    a, b = _operands(*shape, seed=3)
    g = jax.random.normal(jax.random.PRNGKey(4), (B, M, N), jnp.float32)
    da, db = entrywise.entrywise_backward(a, b, g, vmem_limit=64 << 20, interpret=True)
    hi = jax.lax.Precision.HIGHEST
    want_da = jnp.matmul(g, jnp.swapaxes(b, 1, 2), precision=hi)
    want_db = jnp.matmul(jnp.swapaxes(a, 1, 2), g, precision=hi)
    for got, want in ((da, want_da), (db, want_db)):
        assert got.shape == want.shape
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_small_entries_are_read_four_ahead_and_large_ones_two():
    """Four entries in VMEM where they fit the budget (the chip's B16-127³: 9.1 -> 6.1 µs),
    two at 513³ (a third gained nothing there), never more entries than the batch has."""
    forward = ([(127, 127)] * 2, [(127, 127)])
    backward = ([(127, 127)] * 3, [(127, 127)] * 2)
    assert entrywise.depth(16, *forward) == entrywise.depth(16, *backward) == 4
    assert entrywise.depth(3, *forward) == 3
    assert entrywise.depth(1, *forward) == 1
    assert entrywise.depth(16, [(513, 513)] * 2, [(513, 513)]) == 2
    assert entrywise.depth(16, [(513, 513)] * 3, [(513, 513)] * 2) == 2
    need = [entrywise.vmem_need(*forward, buffers) for buffers in (2, 4)]
    assert need[0] < need[1] <= entrywise.VMEM_BUDGET


def test_the_backward_asks_for_its_vmem_and_half_again_only_within_the_budget(monkeypatch):
    a, b = _operands(4, 513, 513, 513)
    g = jnp.zeros((4, 513, 513), jnp.float32)
    _stored_so(monkeypatch, {(4, 513, 513)})
    need = entrywise.vmem_need([(513, 513)] * 3, [(513, 513)] * 2)
    assert entrywise.backward_limit(a, b, g, None) == need * 3 // 2
    assert entrywise.backward_limit(a, b, g, need * 3 // 2) == need * 3 // 2
    assert entrywise.backward_limit(a, b, g, 16 << 20) is None  # past the scoped default
    big = [jnp.zeros((2, 2049, 2049), jnp.float32)] * 3  # its limit: about 345 MiB
    _stored_so(monkeypatch, {(2, 2049, 2049)})
    assert entrywise.backward_limit(*big, None) is None  # no budget given: BACKWARD_CAP
    _stored_so(monkeypatch, {(4, 513, 513)})
    half = [x.astype(jnp.bfloat16) for x in (a, b, g)]
    assert entrywise.backward_limit(*half, None) is None
    _stored_so(monkeypatch, set())
    assert entrywise.backward_limit(a, b, g, None) is None


def test_the_gradient_of_the_matmul_takes_the_dma_backward_where_the_chip_stores_so(
    monkeypatch,
):
    from kernels.matmul.backward import matmul

    a, b = _operands(2, 24, 136, 40, seed=5)
    _stored_so(monkeypatch, {(2, 24, 136), (2, 136, 40), (2, 24, 40)})

    def loss(x, y):
        return jnp.sum(jnp.sin(matmul(x, y)))

    grads = jax.grad(loss, argnums=(0, 1))
    text = str(jax.make_jaxpr(grads)(a, b))
    assert "name=entrywise_backward" in text
    assert "name=entrywise_matmul" in text
    got = jax.jit(grads)(a, b)

    def exact(x, y):
        return jnp.sum(jnp.sin(jnp.matmul(x, y, precision=jax.lax.Precision.HIGHEST)))

    for mine, want in zip(got, jax.grad(exact, argnums=(0, 1))(a, b), strict=True):
        np.testing.assert_allclose(np.asarray(mine), np.asarray(want), rtol=1e-4, atol=1e-4)


def test_large_row_major_float32_entries_ask_for_two_entries_and_half_again_within_a_budget():
    """matmul 0.12.0's rule at the sizes it was measured at (1024³ on a v5e: 96 MiB budget)."""
    from kernels.matmul.backward import SCOPED_DEFAULT, vmem_budget_of

    square = [(1024, 1024)]
    forward = entrywise.row_major_limit(square * 2, square, 16, jnp.float32, 96 << 20)
    backward = entrywise.row_major_limit(square * 3, square * 2, 16, jnp.float32, 96 << 20)
    assert forward == entrywise.vmem_need(square * 2, square) * 3 // 2 == 48 << 20
    assert backward == entrywise.vmem_need(square * 3, square * 2) * 3 // 2 == 81 << 20
    assert vmem_budget_of("v5e") == 96 << 20
    # Off a TPU (ci-bench lower) the budget is the scoped default: the tiled kernel, checked
    # there as it fits every chip.
    assert entrywise.row_major_limit(square * 2, square, 16, jnp.float32, SCOPED_DEFAULT) is None
    assert entrywise.row_major_limit(square * 2, square, 16, jnp.float32, None) is None
    assert entrywise.row_major_limit(square * 2, square, 1, jnp.float32, 96 << 20) is None
    assert entrywise.row_major_limit(square * 2, square, 16, jnp.bfloat16, 96 << 20) is None
    small = [(512, 1024), (1024, 1024)], [(512, 1024)]  # a side under ROW_MAJOR_MIN
    assert entrywise.row_major_limit(*small, 16, jnp.float32, 96 << 20) is None


def test_row_major_float32_entries_take_the_dma_kernel_forward_and_backward(monkeypatch):
    """The rule shrunk to the interpreter's sizes: the matmul and its gradient run both DMA
    kernels over row-major entries and give XLA's exact products; bfloat16, one entry, no
    budget and a side under the rule's keep the tiled kernel."""
    from kernels.matmul.backward import matmul
    from kernels.matmul.kernel import BlockSizes

    monkeypatch.setattr(entrywise, "ROW_MAJOR_MIN", 128)
    _stored_so(monkeypatch, set())  # every array row-major
    a, b = _operands(3, 128, 256, 128, seed=8)
    g = jax.random.normal(jax.random.PRNGKey(9), (3, 128, 128), jnp.float32)

    def with_budget(budget):
        return lambda x, y: matmul(x, y, BlockSizes(), BlockSizes(), budget)

    def both(fn):
        return lambda x, y, z: jax.vjp(fn, x, y)[1](z)

    fn = with_budget(96 << 20)
    text = str(jax.make_jaxpr(both(fn))(a, b, g))
    assert "name=entrywise_backward" in text
    assert _takes_dma(fn, a, b)
    out, pull = jax.vjp(jax.jit(fn), a, b)
    hi = jax.lax.Precision.HIGHEST
    wants = (
        jnp.matmul(a, b, precision=hi),
        jnp.matmul(g, jnp.swapaxes(b, 1, 2), precision=hi),
        jnp.matmul(jnp.swapaxes(a, 1, 2), g, precision=hi),
    )
    for got, want in zip((out, *pull(g)), wants, strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-4)

    half = [x.astype(jnp.bfloat16) for x in (a, b)]
    assert not _takes_dma(fn, *half)
    assert not _takes_dma(fn, a[:1], b[:1])
    assert not _takes_dma(with_budget(None), a, b)
    assert "name=entrywise_backward" not in str(jax.make_jaxpr(both(with_budget(None)))(a, b, g))
    narrow = _operands(3, 64, 256, 128, seed=10)
    assert not _takes_dma(fn, *narrow)
