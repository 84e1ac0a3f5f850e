"""A production grouped matmul as its library ships it: tokamax's Pallas Mosaic TPU ``gmm``
(imported from the installed tokamax, never copied), whose ``emit_pipeline`` runs a
``while`` over a grid read from SMEM (the active m tiles, from the group sizes)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from ci_bench.measure.model import analyze_case
from ci_bench.measure.model.dma import EDGE_NOTE
from ci_bench.measure.model.whiles import BLOCK_NOTE, WHILE_NOTE
from tests.test_model import ADHOC, KIB, _adhoc

kernel = pytest.importorskip("tokamax._src.ops.ragged_dot.pallas_mosaic_tpu_kernel")

DEFAULT = (jax.lax.Precision.DEFAULT, jax.lax.Precision.DEFAULT)


def _gmm(lhs, rhs, sizes):
    return kernel.gmm(
        lhs, rhs, sizes, precision=DEFAULT, out_dtype=jnp.bfloat16, tiling=(128, 128, 128)
    )


def _inputs(m, sizes):
    def make(case, key):
        lhs = jnp.ones((m, 256), jnp.bfloat16)
        rhs = jnp.ones((len(sizes), 256, 256), jnp.bfloat16)
        return lhs, rhs, jnp.array(sizes, jnp.int32)

    return make


def _smem(m, groups):
    # the call's SMEM inputs, read once: the dynamic grid (1), group offsets (G + 1),
    # group ids and m tile ids (m tiles + G - 1 each), the group offset (1); int32.
    tiles = m // 128 + groups - 1
    return 4 * (1 + groups + 1 + 2 * tiles + 1)


@pytest.mark.parametrize("chip", ["v5e", "7x"])
def test_tokamax_gmm_pipeline_sized_at_run_time_is_fully_modelled(chip):
    # lhs [512, 256], rhs [4, 256, 256], groups of 128: the inner grid (n tiles 2, active m
    # tiles 4 -- read from SMEM --, k tiles 2) = 16 iterations, k fastest. The lhs block
    # (m, k) and the rhs block (group, k, n) change every iteration: 16 x 32 KiB each; the
    # bf16 output block (m, n) changes every 2: 8 x 32 KiB. One 128³ dot per iteration.
    model = analyze_case(_adhoc(_gmm, _inputs(512, [128] * 4)), ADHOC, [chip])
    assert model.status == "ok", model.reason
    assert WHILE_NOTE in model.notes
    assert model.flops == 16 * 2 * 128**3
    assert model.hbm_bytes == (16 + 16 + 8) * 32 * KIB + _smem(512, 4)
    (call,) = model.calls
    # one step of the grid-less call plus each of the 16 iterations at a step's fixed cost
    assert call.chips[chip].overhead_us == pytest.approx(17 * 0.35)


def test_tokamax_gmm_iterations_follow_the_group_sizes():
    # 256 rows, groups (128, 128, 0, 0): 2 active m tiles, 8 iterations: half the blocks
    # and dots of groups (64, 64, 64, 64), where each group visits its tile (4 active).
    whole = analyze_case(_adhoc(_gmm, _inputs(256, [128, 128, 0, 0])), ADHOC, ["v5e"])
    split = analyze_case(_adhoc(_gmm, _inputs(256, [64] * 4)), ADHOC, ["v5e"])
    assert whole.status == split.status == "ok"
    assert whole.flops == 8 * 2 * 128**3
    assert split.flops == 16 * 2 * 128**3
    assert whole.hbm_bytes == (8 + 8 + 4) * 32 * KIB + _smem(256, 4)


def test_tokamax_gmm_edge_blocks_of_dynamic_size_are_bounded_by_their_block():
    # k = 384 with k tiles of 256: the second k tile is a 128-wide edge block, copied with
    # a size read at run time (``lhs[i, :n]``). Each copy is counted at its whole block,
    # said as an upper bound: 2 m tiles x 2 k tiles of (128, 256) bf16 lhs blocks, 64 KiB.
    def gmm(lhs, rhs, sizes):
        return kernel.gmm(
            lhs, rhs, sizes, precision=DEFAULT, out_dtype=jnp.bfloat16, tiling=(128, 256, 128)
        )

    def make(case, key):
        lhs = jnp.ones((256, 384), jnp.bfloat16)
        return lhs, jnp.ones((2, 384, 128), jnp.bfloat16), jnp.array([128, 128], jnp.int32)

    model = analyze_case(_adhoc(gmm, make), ADHOC, ["v5e"])
    assert model.status == "ok", model.reason
    assert EDGE_NOTE in model.notes
    # rhs (256, 128) blocks change every iteration too (4 x 64 KiB); 2 (128, 128) outputs.
    assert model.hbm_bytes == (4 + 4) * 64 * KIB + 2 * 32 * KIB + _smem(256, 2)


@pytest.mark.parametrize("buffers", [3, 4])
def test_tokamax_gmm_with_a_lookahead_pipeline_moves_the_same_blocks(buffers):
    # input_buffer_count 3 or 4: the lhs is pl.Buffered(n, use_lookahead=True), whose
    # fetches are while loops of their own (before the pipeline and in each iteration,
    # sized by the grid read from SMEM and the slots in flight). Lookahead changes when a
    # block is fetched, never how many: the same 16 + 16 + 8 blocks and 16 dots as double
    # buffering, and the same 17 steps (the fetch loops are not pipeline steps).
    def gmm(lhs, rhs, sizes):
        return kernel.gmm(
            lhs,
            rhs,
            sizes,
            precision=DEFAULT,
            out_dtype=jnp.bfloat16,
            tiling=(128, 128, 128),
            input_buffer_count=buffers,
        )

    model = analyze_case(_adhoc(gmm, _inputs(512, [128] * 4)), ADHOC, ["v5e"])
    assert model.status == "ok", model.reason
    assert BLOCK_NOTE in model.notes
    assert model.flops == 16 * 2 * 128**3
    assert model.hbm_bytes == (16 + 16 + 8) * 32 * KIB + _smem(512, 4)
    (call,) = model.calls
    assert call.chips["v5e"].overhead_us == pytest.approx(17 * 0.35)


def test_a_lookahead_pipeline_of_float32_dots_is_walked_whole_and_timed():
    """Float32 operands at DEFAULT precision: the lookahead pipeline is run as a whole, so
    the case's bytes and FLOPs are the double-buffering ones (at 4 bytes an element), and
    since model revision 5 its float32 x float32 dots are priced (1.53 bf16 passes)."""

    def gmm(lhs, rhs, sizes):
        return kernel.gmm(
            lhs, rhs, sizes, precision=DEFAULT, out_dtype=jnp.bfloat16,
            tiling=(128, 128, 128), input_buffer_count=3,
        )  # fmt: skip

    def make(case, key):
        lhs, rhs, sizes = _inputs(512, [128] * 4)(case, key)
        return lhs.astype(jnp.float32), rhs.astype(jnp.float32), sizes

    model = analyze_case(_adhoc(gmm, make), ADHOC, ["v5e"])
    assert model.status == "ok", model.reason
    assert model.chips["v5e"].modelled_us > 0
    assert BLOCK_NOTE in model.notes
    assert model.flops == 16 * 2 * 128**3
    assert model.hbm_bytes == (16 + 16) * 64 * KIB + 8 * 32 * KIB + _smem(512, 4)
