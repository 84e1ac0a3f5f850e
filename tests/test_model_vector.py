"""The vector and transcendental term against counts worked out by hand (issue 39).

A vreg is 8 sublanes x 128 lanes of 32-bit words; a 16-bit type packs (16, 128) on chips
with a bf16 VPU (v6e and later) and is worked as float32 below. Each expectation is the
arithmetic in its comment; nothing is executed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.measure.model import analyze_case
from ci_bench.measure.model.body import step_cost
from ci_bench.measure.model.chips import chip
from ci_bench.measure.model.vector import vregs
from tests.harness.factories import adhoc_spec


def _body(kernel, *shapes_dtypes):
    """The kernel body's jaxpr of a grid-less pallas_call over arrays of these shapes."""
    args = [jnp.zeros(s, d) for s, d in shapes_dtypes]
    out = jax.ShapeDtypeStruct(shapes_dtypes[0][0], shapes_dtypes[0][1])

    def f(*xs):
        return pl.pallas_call(kernel, out_shape=out)(*xs)

    (eqn,) = jax.make_jaxpr(f)(*args).eqns
    return eqn.params["jaxpr"]


def _softmax_row(x_ref, o_ref):
    x = x_ref[...]
    m = jnp.max(x, axis=-1, keepdims=True)
    o_ref[...] = jnp.exp(x - m)


def test_vregs_pad_to_the_native_tile_and_pack_16_bit_types_only_when_asked():
    assert vregs((8, 128), 4, packed=False) == 1
    assert vregs((9, 129), 4, packed=False) == 4  # 2 row groups x 2 lane tiles
    assert vregs((16, 256), 2, packed=False) == 4  # bf16 worked as f32: (8, 128) tiles
    assert vregs((16, 256), 2, packed=True) == 2  # packed (16, 128)
    assert vregs((3, 16, 128), 4, packed=False) == 6  # leading dims multiply
    assert vregs((100,), 4, packed=False) == 1  # a vector is one row


def test_an_elementwise_exp_and_lane_max_body_counts_the_hand_computed_vreg_ops():
    body = _body(_softmax_row, ((16, 256), jnp.float32))
    cost = step_cost(body)
    # x: f32 (16, 256) = 2 row groups x 2 lane tiles = 4 vregs.
    # reduce_max over lanes: fold 4 -> 2 vregs (2 ops); the steps across lanes are the
    # XLU's (the compiler: 0.75 VALU a vreg, all of it the fold). The (16,) -> (16, 1)
    # broadcast adds a unit dim only, and the lane-replicated max is the XLU's: free here.
    # sub: 4. exp: 4 EUP pushes and 2 VALU ops a vreg to finish them (8).
    assert cost.vpu_ops == 2 + 4 + 8
    assert cost.eup_ops == 4
    assert cost.flops == 0


def test_bf16_packs_on_a_chip_with_a_bf16_vpu_and_widens_below_it():
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.tanh(x_ref[...] * y_ref[...])

    body = _body(kernel, ((32, 256), jnp.bfloat16), ((32, 256), jnp.bfloat16))
    cost = step_cost(body)
    # bf16 (32, 256): 4 x 2 = 8 vregs as f32, 2 x 2 = 4 packed. Without a bf16 VPU each op
    # unpacks its bf16 operands (1 a f32 vreg each), works in f32 and packs (0.5): mul
    # 8 x (2 + 1 + 0.5) = 28; tanh 8 x (1 + 1 + 0.5) = 20 and 8 EUP pushes (the compiler's
    # 3.5 and 2.5 a vreg). Packed: mul 4, tanh 4 VALU + 4 EUP.
    assert (cost.vpu_ops, cost.eup_ops) == (48, 8)
    assert (cost.vpu_ops_packed, cost.eup_ops_packed) == (8, 4)
    assert not chip("v5e").bf16_vpu
    assert chip("v6e").bf16_vpu
    assert chip("7x").bf16_vpu


def test_a_sublane_reduction_folds_vregs_then_takes_three_shuffle_steps():
    def kernel(x_ref, o_ref):
        o_ref[0:1, :] = jnp.sum(x_ref[...], axis=0, keepdims=True)

    body = _body(kernel, ((64, 128), jnp.float32))
    # f32 (64, 128) = 8 vregs folded into 1 (7 adds), then 3 shuffle + add steps (6).
    assert step_cost(body).vpu_ops == 7 + 6


def test_a_loop_in_the_body_multiplies_its_vector_work_by_its_trip_count():
    def kernel(x_ref, o_ref):
        def step(i, acc):
            return acc + jnp.exp(acc)

        o_ref[...] = jax.lax.fori_loop(0, 5, step, x_ref[...])

    body = _body(kernel, ((8, 128), jnp.float32))
    cost = step_cost(body)
    # One vreg: per iteration 1 exp (1 EUP push, 2 VALU ops) and 1 add (VALU); the scalar
    # counter is free.
    assert (cost.vpu_ops, cost.eup_ops) == (15, 5)


def _attention(q, k, v):
    """A flash-attention-like body: one (512, 128) query block against one kv block per
    step, softmax over the logits in float32."""
    bq, bk = 512, 512

    def kernel(q_ref, k_ref, v_ref, o_ref):
        s = jax.lax.dot_general(
            q_ref[...], k_ref[...], (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32
        )
        row = jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
        col = jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
        s = jnp.where(col <= row, s * 0.125, -1e30)
        m = jnp.max(s, axis=-1, keepdims=True)
        p = jnp.exp(s - m)
        l_ = jnp.sum(p, axis=-1, keepdims=True)
        o = jnp.dot(p.astype(jnp.bfloat16), v_ref[...], preferred_element_type=jnp.float32)
        o_ref[...] = (o / l_).astype(o_ref.dtype)

    n, d = q.shape
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        grid=(n // bq, n // bk),
        in_specs=[
            pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
            pl.BlockSpec((bk, d), lambda i, j: (j, 0)),
        ],
        out_specs=pl.BlockSpec((bq, d), lambda i, j: (i, 0)),
    )(q, k, v)


def _spec() -> KernelSpec:
    def make(case, key):
        return tuple(jnp.zeros((2048, 128), jnp.bfloat16) for _ in range(3))

    return adhoc_spec(_attention, make, "bfloat16", name="attn")


def test_a_scalar_operand_is_splat_not_unpacked_and_a_bf16_result_skips_refinement():
    def scaled(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    def divided(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] / y_ref[...]

    bf16 = ((32, 256), jnp.bfloat16)
    cost = step_cost(_body(scaled, bf16))
    # 8 vregs as f32: unpack x (8), mul (8), pack (4); the 2.0 is no vreg to unpack.
    assert cost.vpu_ops == 8 + 8 + 4
    cost = step_cost(_body(divided, bf16, bf16))
    # Widened (v5e): unpack both (16), a bf16-precision division 2 a vreg (16), pack (4):
    # the compiler's 4.5 a vreg. Packed (v6e on): 2 a packed vreg, never float32's 14.
    assert (cost.vpu_ops, cost.eup_ops) == (16 + 16 + 4, 8)
    assert (cost.vpu_ops_packed, cost.eup_ops_packed) == (2 * 4, 4)


def test_the_packed_vector_count_and_the_256_deep_mxu_go_together():
    """A dot's passes are counted 256 deep with the packed (bf16 VPU) vector work: true of
    every chip in the table, and a new chip that breaks it fails here."""
    from ci_bench.measure.model.chips import CHIP_NAMES

    for name in CHIP_NAMES:
        assert chip(name).bf16_vpu == (chip(name).mxu_column_size == 256), name


def test_a_dot_sums_its_partial_products_over_k_on_the_valu():
    def kernel(a_ref, b_ref, o_ref):
        o_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    body = _body(kernel, ((256, 512), jnp.float32), ((512, 512), jnp.float32))
    cost = step_cost(body)
    # The f32 (256, 512) result is 32 x 4 = 128 vregs; k = 512 is 4 passes of a 128-deep
    # MXU (v5e), each popped and added to the others: 3 adds a vreg (the compiler's count
    # for float32, tpu_vector_ops.py), and 2 passes of a 256-deep one (v6e on): 1 add.
    assert (cost.vpu_ops, cost.vpu_ops_packed) == (128 * 3, 128 * 1)
    assert cost.eup_ops == 0


@pytest.mark.parametrize(("name", "bound"), [("v5e", "compute"), ("7x", "vector")])
def test_an_attention_like_body_is_timed_on_its_busiest_unit(name, bound):
    model = analyze_case(_spec(), Case("attn", {"N": 1}, "bfloat16"), [name])
    assert model.status == "ok"
    on = model.chips[name]
    assert on.vector_us is not None
    # Per step, f32 scores (512, 512) = 256 vregs: two iotas 512, the compare 256, the
    # scale 256, the -1e30 splat 1 (one vreg, reused), the select 256; the row max's fold
    # 256 - 64 = 192 (across lanes: the XLU's); the sub 256; exp 2 x 256 = 512; the row
    # sum's fold 192; p to bf16 packs into 128; o / l over (512, 128) = 64 vregs, a
    # division 14 each on v5e (its compile), 2 on a chip with a bf16 VPU (v6e's); the cast
    # out packs into 32. The second dot (k = 512) sums its passes into o's 64 vregs: 3 adds
    # each on v5e's 128-deep MXU, 1 on 7x's 256-deep one; the first (k = 128) has one pass.
    division = 64 * (14 if name == "v5e" else 2)
    accumulate = 64 * (3 if name == "v5e" else 1)
    per_step = 512 + 256 + 256 + 1 + 256 + 192 + 256 + 512 + 192 + 128 + division + 32 + accumulate
    steps = 4 * 4
    assert on.vector_us == pytest.approx(steps * per_step / chip(name).vpu_ops_per_s * 1e6)
    assert on.eup_us is not None
    assert on.eup_us > 0
    # Two 512 x 512 x 128 dots a step: v5e's MXU takes longer than its VALU, 7x's less.
    assert (on.vector_us > on.compute_us) == (bound == "vector")
    assert on.bound == bound
    # The step's busy time is the busiest unit plus the step cost, never less.
    steps = 4 * 4
    assert on.modelled_us >= on.vector_us + steps * chip(name).step_overhead_us
    assert not any("MXU only" in n for n in model.notes)


def test_a_cumsum_takes_log2_shift_and_add_steps_per_vreg():
    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.cumsum(x_ref[...], axis=0)

    body = _body(kernel, ((64, 128), jnp.float32))
    # 8 vregs, a scan over 64 rows: ceil(log2 64) = 6 steps of a shift and an add each.
    assert step_cost(body).vpu_ops == 8 * 2 * 6
    assert not step_cost(body).notes


def test_a_repeat_costs_its_operands_vregs_like_a_broadcast():
    def kernel(x_ref, o_ref):
        o_ref[...] = jax.lax.tile(x_ref[:, :128], (1, 4))  # what pltpu.repeat was

    body = _body(kernel, ((64, 512), jnp.float32))
    # The (64, 128) operand is 8 vregs; its 4 copies along lanes are the same 8 vregs.
    assert step_cost(body).vpu_ops == 8


def test_the_vector_rates_are_the_sourced_figures_and_the_labelled_estimate():
    # v5e: 4 VALU ops per cycle at jax's MXU-derived clock, 197 TFLOP/s / (4 MXUs x 128² x
    # 2) = 1.503 GHz, the scaling book's "1.5GHz"; v5p 1.75 GHz; v4 2 ops per cycle.
    assert chip("v5e").valu_slots == 4
    assert chip("v5e").clock_hz == pytest.approx(1.503e9, rel=1e-3)
    assert chip("v5p").clock_hz == pytest.approx(1.75e9, rel=1e-3)
    assert chip("v4").valu_slots == 2
    # v6e and later: no public clock; the estimate is v5p's, never jax's MXU quotient.
    assert chip("7x").clock_hz == chip("v6e").clock_hz == 1.75e9
    assert chip("7x").vpu_ops_per_s == 4 * 1.75e9
    assert chip("7x").eup_ops_per_s == 1.75e9
