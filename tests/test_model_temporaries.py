"""The VMEM a kernel body's own values take (model revision 8, ``temporaries.py``).

Each kernel here is written in the test and traced on this CPU (nothing runs); the bytes
expected are worked out by hand from the rule the compiler showed (libtpu's refusals for a
TPU v5e): a dot accumulated into a ref stages its left operand as bfloat16, any other dot
keeps its float32 result, an unrolled loop counts each copy, a conditional its largest
branch, and a value the 256 KiB register file holds costs nothing.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.measure.model import analyze_case
from ci_bench.measure.model.temporaries import REGISTER_FILE_BYTES, temporaries_bytes
from tests.harness.factories import adhoc_spec

KIB = 1024
MIB = 1024 * KIB
ADHOC = Case("adhoc", {"N": 1}, "bfloat16")


def _spec(fn, shapes: list[tuple[int, ...]], dtype=jnp.bfloat16) -> KernelSpec:
    return adhoc_spec(fn, lambda case, key: tuple(jnp.zeros(s, dtype) for s in shapes), "bfloat16")


def _one_block(kernel, m: int, k: int, n: int, out_dtype=jnp.float32):
    """One grid step over a [m, k] and a [k, n] block; the output [m, n] (one buffer each:
    every block is the same at every step)."""

    def call(a, b):
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((m, n), out_dtype),
            grid=(1,),
            in_specs=[
                pl.BlockSpec((m, k), lambda i: (0, 0)),
                pl.BlockSpec((k, n), lambda i: (0, 0)),
            ],
            out_specs=pl.BlockSpec((m, n), lambda i: (0, 0)),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
        )(a, b)

    return call


def _accumulate(a_ref, b_ref, o_ref):
    o_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)


def _scores(a_ref, b_ref, o_ref):
    s = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)
    o_ref[...] = jnp.exp(s - jnp.max(s, axis=1, keepdims=True))


def _body_of(fn, *shapes):
    """The kernel body's jaxpr of the one pallas_call in ``fn``."""
    closed = jax.make_jaxpr(fn)(*(jax.ShapeDtypeStruct(s, jnp.bfloat16) for s in shapes))
    (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name == "pallas_call"]
    return eqn.params["jaxpr"]


def test_a_dot_accumulated_into_a_ref_stages_its_left_operand_as_bfloat16():
    # a [1024, 2048] bf16 block 4 MiB, b [2048, 256] 1 MiB, out [1024, 256] f32 1 MiB, one
    # buffer each (fixed blocks); the dot's left operand staged: 1024 x 2048 x 2 B = 4 MiB.
    fn = _one_block(_accumulate, 1024, 2048, 256)
    model = analyze_case(_spec(fn, [(1024, 2048), (2048, 256)]), ADHOC, ["v5e"])
    assert model.status == "ok", model.reason
    assert model.vmem_bytes == (4 + 1 + 1) * MIB + 4 * MIB
    assert temporaries_bytes(_body_of(fn, (1024, 2048), (2048, 256))) == 4 * MIB


@pytest.mark.parametrize(
    ("m", "k", "n"),
    [
        (2048, 2048, 128),  # one 128-column tile of b: a streams past once (8 MiB not staged)
        (2048, 256, 256),  # b small (256 x 256): held while a streams (1 MiB not staged)
        (2048, 128, 1024),  # one 128-row tile of b: a read as it is (0.5 MiB not staged)
    ],
)
def test_a_left_operand_fed_once_is_not_staged(m, k, n):
    # libtpu for a v5e: (2048, 2048, 128) at 2048³ bfloat16 needs 10.85 MiB, its blocks
    # 11; (2048, 256, 256) at 4096³ needs 6.25 MiB and (2048, 128, 1024) at 2048³ 17.5,
    # exactly their blocks.
    fn = _one_block(_accumulate, m, k, n)
    assert temporaries_bytes(_body_of(fn, (m, k), (k, n))) == 0


def test_a_dot_read_by_vector_work_keeps_its_float32_result():
    # s = a·b is [1024, 512] float32 (2 MiB), read by max and exp: kept whole.
    fn = _one_block(_scores, 1024, 128, 512)
    assert temporaries_bytes(_body_of(fn, (1024, 128), (128, 512))) == 1024 * 512 * 4


def test_values_the_register_file_holds_cost_nothing():
    fn = _one_block(_accumulate, 256, 256, 256)  # a staged: 256 x 256 x 2 B = 128 KiB
    assert REGISTER_FILE_BYTES >= 256 * 256 * 2
    assert temporaries_bytes(_body_of(fn, (256, 256), (256, 256))) == 0


@pytest.mark.parametrize(("unroll", "copies"), [(True, 4), (2, 2), (False, 1)])
def test_an_unrolled_loop_counts_each_copy_of_its_values(unroll, copies):
    # Four [512, 128] x [128, 512] dots in a loop (pl.loop over column blocks of b): each
    # result [512, 512] float32 (1 MiB) is read by exp, not accumulated.
    def kernel(a_ref, b_ref, o_ref):
        @pl.loop(0, 4, unroll=unroll)
        def _(j):
            cols = pl.ds(pl.multiple_of(j * 512, 512), 512)
            s = jnp.dot(a_ref[...], b_ref[:, cols], preferred_element_type=jnp.float32)
            o_ref[:, cols] = jnp.exp(s)

    fn = _one_block(kernel, 512, 128, 2048)
    assert temporaries_bytes(_body_of(fn, (512, 128), (128, 2048))) == copies * MIB


def test_a_conditional_counts_its_largest_branch():
    def kernel(a_ref, b_ref, o_ref):
        first = pl.program_id(0) == 0

        @pl.when(first)
        def _():
            _scores(a_ref, b_ref, o_ref)  # [1024, 1024] float32 kept: 4 MiB

        @pl.when(jnp.logical_not(first))
        def _():
            _accumulate(a_ref, b_ref, o_ref)  # a [1024, 512] staged: 1 MiB

    fn = _one_block(kernel, 1024, 512, 1024)
    body = _body_of(fn, (1024, 512), (512, 1024))
    assert temporaries_bytes(body) == 4 * MIB + 1 * MIB  # two conditionals, one after the other

    def either(a_ref, b_ref, o_ref):
        jax.lax.cond(
            pl.program_id(0) == 0,
            lambda: _scores(a_ref, b_ref, o_ref),
            lambda: _accumulate(a_ref, b_ref, o_ref),
        )

    fn = _one_block(either, 1024, 512, 1024)
    assert temporaries_bytes(_body_of(fn, (1024, 512), (512, 1024))) == 4 * MIB


def test_the_projects_matmul_at_a_tiling_the_compiler_refuses_no_longer_fits():
    # (1024, 1024, 1024) bfloat16 at 4096³: blocks and accumulator 16 MiB, counted as
    # fitting v5e's 16 MiB before (revision 7: strictly under, so it failed by a hair);
    # the staged left operand (2 MiB) makes 18 MiB. libtpu needed 18.36 MiB
    # (benchmarks/data/tpu_v5e_vmem_probe_2026-12-06.json).
    from kernels.matmul import BlockSizes, matmul_tiled

    tiles = BlockSizes(1024, 1024, 1024)
    spec = _spec(functools.partial(matmul_tiled, block_sizes=tiles), [(4096, 4096)] * 2)
    model = analyze_case(spec, ADHOC, ["v5e"])
    assert model.vmem_bytes == 18 * MIB
    assert not model.chips["v5e"].fits
    assert "18.00 MiB of VMEM" in model.chips["v5e"].why_not


def test_an_accumulator_of_a_one_step_reduction_is_forwarded_within_the_step():
    # (1024, 2048, 256) bfloat16 at 2048³: K in one step, so the float32 accumulator is
    # written and read within each step. Blocks: a [1024, 2048] 4 MiB x 2 (i moves), b
    # [2048, 256] 1 MiB x 2, out [1024, 256] bf16 0.5 MiB x 2 = 11 MiB; a staged, 4 MiB;
    # the accumulator kept as one [1024, 128] float32 column, 0.5 MiB (not its 1 MiB):
    # 15.5 MiB, under v5e's 16. libtpu needed 15.48 MiB and compiled it; revision 7 counted
    # 12 (no staged copy) and a count with the whole accumulator, 16, would refuse it.
    from kernels.matmul import BlockSizes, matmul_tiled

    tiles = BlockSizes(1024, 2048, 256)
    spec = _spec(functools.partial(matmul_tiled, block_sizes=tiles), [(2048, 2048)] * 2)
    model = analyze_case(spec, ADHOC, ["v5e"])
    assert model.vmem_bytes == 15.5 * MIB
    assert model.chips["v5e"].fits


def test_a_scratch_the_grid_carries_or_a_copy_fills_is_counted_whole():
    # A [512, 512] float32 scratch (1 MiB). Over a sequential axis of 4 steps its value can
    # pass from one step to the next; filled by a copy, it is a copy's buffer: whole both
    # times. Only a one-step reduction loaded and stored as a vector is forwarded.
    def accumulate(x_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += x_ref[...].astype(jnp.float32)
        o_ref[...] = acc_ref[...]

    def copied(x_hbm, o_ref, buf_ref, sem):
        copy = pltpu.make_async_copy(x_hbm, buf_ref, sem)
        copy.start()
        copy.wait()
        o_ref[...] = buf_ref[...].astype(jnp.float32)

    def call(kernel, steps, in_spec, scratch):
        def fn(x):
            return pl.pallas_call(
                kernel,
                out_shape=jax.ShapeDtypeStruct((512, 512), jnp.float32),
                grid=(steps,),
                in_specs=[in_spec],
                out_specs=pl.BlockSpec((512, 512), lambda i: (0, 0)),
                scratch_shapes=scratch,
                compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
            )(x)

        return fn

    block = pl.BlockSpec((512, 512), lambda i: (0, 0))
    acc = [pltpu.VMEM((512, 512), jnp.float32)]
    column = 512 * 128 * 4  # one (rows, 128) float32 column
    one_step = analyze_case(_spec(call(accumulate, 1, block, acc), [(512, 512)]), ADHOC, ["v5e"])
    four = analyze_case(_spec(call(accumulate, 4, block, acc), [(512, 512)]), ADHOC, ["v5e"])
    assert four.vmem_bytes - one_step.vmem_bytes == 1 * MIB - column
    hbm = pl.BlockSpec(memory_space=pl.ANY)
    with_copy = [pltpu.VMEM((512, 512), jnp.bfloat16), pltpu.SemaphoreType.DMA(())]
    model = analyze_case(_spec(call(copied, 1, hbm, with_copy), [(512, 512)]), ADHOC, ["v5e"])
    assert model.vmem_bytes == 1 * MIB + 512 * 512 * 2  # the output block, the whole buffer
