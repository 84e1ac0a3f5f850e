"""The walker's rules for kernels as production libraries write them, each on a small kernel
written here, then jax's own shipped kernels (imported from the installed jax, never copied)
traced as every chip the model knows."""

from __future__ import annotations

import functools
import importlib

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from ci_bench.measure.model import analyze_case
from ci_bench.measure.model.chips import CHIP_NAMES
from tests.test_model import ADHOC, KIB, _adhoc

megablox = importlib.import_module("jax.experimental.pallas.ops.tpu.megablox.gmm")


def _acc_matmul(x, w, *, bk=128):
    """Init branch pl.when(k == 0): acc = x @ w; accumulate branch pl.when(k > 0): acc += x @ w."""
    m, k = x.shape
    n = w.shape[1]

    def kernel(x_ref, w_ref, o_ref, acc_ref):
        kk = pl.program_id(1)

        @pl.when(kk == 0)
        def _():
            acc_ref[...] = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

        @pl.when(kk > 0)
        def _():
            acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

        o_ref[...] = acc_ref[...]

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        grid=(m // 128, k // bk),
        in_specs=[
            pl.BlockSpec((128, bk), lambda i, kk: (i, kk)),
            pl.BlockSpec((bk, n), lambda i, kk: (kk, 0)),
        ],
        out_specs=pl.BlockSpec((128, n), lambda i, kk: (i, 0)),
        scratch_shapes=[pltpu.VMEM((128, n), jnp.float32)],
    )(x, w)


def _two(case, key):
    return jnp.ones((256, 512), jnp.bfloat16), jnp.ones((512, 128), jnp.bfloat16)


def test_complementary_when_on_program_ids_count_one_dot_per_step():
    model = analyze_case(_adhoc(_acc_matmul, _two), ADHOC, ["v5e"])
    assert model.status == "ok", model.reason
    # 2 x 4 steps, one (128, 128, 128) dot each: 2·256·512·128, not twice that.
    assert model.flops == 2 * 256 * 512 * 128
    assert "pl.when on program ids: each branch counted at the steps it runs" in model.notes


def _vmapped_copy(x):
    @jax.custom_batching.custom_vmap
    def op(y):
        spec = pl.BlockSpec((128, 128), lambda i: (i, 0))
        return pl.pallas_call(
            lambda a, o: o.__setitem__(..., a[...] * 2),
            out_shape=jax.ShapeDtypeStruct(y.shape, y.dtype),
            grid=(y.shape[0] // 128,),
            in_specs=[spec],
            out_specs=spec,
        )(y)

    @op.def_vmap
    def _rule(axis_size, in_batched, y):
        return jax.vmap(op.fun)(y), True

    return op(x)


def test_the_walk_goes_into_custom_vmap_call_like_custom_vjp():
    model = analyze_case(
        _adhoc(_vmapped_copy, lambda c, k: jnp.ones((512, 128), jnp.float32)), ADHOC, ["v5e"]
    )
    assert model.status == "ok", model.reason
    assert model.grid_steps == 4
    assert model.hbm_bytes == 2 * 512 * 128 * 4  # read once, written once
    assert not model.not_modelled


def _prefetched(x, starts):
    """Scalar prefetch computed in the same function (as megablox computes group metadata)."""
    order = jnp.argsort(starts).astype(jnp.int32)

    def kernel(idx_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...]

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(4,),
        in_specs=[pl.BlockSpec((128, 128), lambda i, idx: (idx[i], 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i, idx: (i, 0)),
    )
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid_spec=grid_spec
    )(order, x)


def test_a_scalar_prefetch_operand_computed_in_the_function_is_evaluated():
    # jax's DCE keeps every pallas_call (its rule never removes one): the consuming call
    # itself was in the slice, and the case was refused as "computed by another pallas_call".
    def make(case, key):
        return jnp.ones((512, 128), jnp.float32), jnp.array([3, 2, 1, 0], jnp.int32)

    model = analyze_case(_adhoc(_prefetched, make), ADHOC, ["v5e"])
    assert model.status == "ok", model.reason
    (call,) = model.calls
    assert call.grid == [4]
    assert model.hbm_bytes == 2 * 512 * 128 * 4


def _gmm_inputs(sizes):
    def make(case, key):
        m = sum(sizes)
        lhs = jnp.ones((m, 256), jnp.bfloat16)
        rhs = jnp.ones((len(sizes), 256, 256), jnp.bfloat16)
        return lhs, rhs, jnp.array(sizes, jnp.int32)

    return make


@pytest.mark.parametrize("name", CHIP_NAMES)
def test_jaxs_megablox_gmm_with_its_dynamic_grid_as_every_chip(name):
    # lhs [512, 256], rhs [4, 256, 256], groups of 128 rows, tiles (128, 128, 128): the grid
    # (n tiles 2, active m tiles 4 -- a traced dimension, from the group sizes --, k tiles
    # 2) = 16 steps, k fastest: the lhs block (m, k) and the rhs block (group, k, n) change
    # every step: 16 x 32 KiB each; the f32 output once (512 KiB): 1.5 MiB. One (128³) dot
    # per step.
    fn = functools.partial(megablox.gmm, tiling=(128, 128, 128))
    model = analyze_case(_adhoc(fn, _gmm_inputs([128] * 4)), ADHOC, [name])
    assert model.status == "ok", model.reason
    assert model.grid_steps == 16
    assert model.hbm_bytes == 1536 * KIB
    assert model.flops == 2 * 512 * 256 * 256
    assert "a dynamic grid: its size from the case's inputs" in model.notes
    assert model.chips[name].modelled_us > 0


def test_jaxs_megablox_grid_follows_the_group_sizes():
    # 256 rows, m tiles of 128. Groups (64, 64, 64, 64) split both tiles: each group visits
    # its tile, 4 active tiles; groups (128, 128, 0, 0): 2 active tiles. Grid (n 2, active,
    # k 2): 16 steps against 8, read from the group sizes at run time.
    fn = functools.partial(megablox.gmm, tiling=(128, 128, 128))
    split = analyze_case(_adhoc(fn, _gmm_inputs([64] * 4)), ADHOC, ["v5e"])
    whole = analyze_case(_adhoc(fn, _gmm_inputs([128, 128, 0, 0])), ADHOC, ["v5e"])
    assert split.status == whole.status == "ok"
    assert (split.grid_steps, whole.grid_steps) == (16, 8)
    # The useful work is the same 2·256·256·256 FLOPs; the split tiles run twice the dots.
    assert (split.flops, whole.flops) == (2 * 2 * 256**3, 2 * 256**3)


@pytest.mark.parametrize("name", ["v5e", "7x"])
def test_jaxs_megablox_tgmm_as_every_chip(name):
    fn = functools.partial(megablox.tgmm, tiling=(128, 128, 128))

    def make(case, key):
        return (
            jnp.ones((256, 512), jnp.bfloat16),
            jnp.ones((512, 256), jnp.bfloat16),
            jnp.array([128] * 4, jnp.int32),
        )

    model = analyze_case(_adhoc(lambda a, b, g: fn(a, b, g), make), ADHOC, [name])
    assert model.status == "ok", model.reason
    assert model.flops == 2 * 512 * 256 * 256  # every group's k x n product, once
    assert model.grid_steps == 16


def test_an_emit_pipeline_kernel_moves_each_block_once():
    from ci_bench.contract.spec import Case
    from tests.fixtures.emit_pipeline_kernel import SPEC

    model = analyze_case(SPEC, Case("emit_pipeline", {"R": 512}, "float32"), ["v5e", "8i"])
    assert model.status == "ok", model.reason
    assert model.hbm_bytes == 2 * 512 * 128 * 4  # read once, written once
    assert set(model.chips) == {"v5e", "8i"}


def _looped(x, n):
    """A pallas_call inside fori_loop(0, n) where n is a traced value of the inputs."""
    spec = pl.BlockSpec((128, 128), lambda i: (i, 0))
    call = pl.pallas_call(
        lambda a, o: o.__setitem__(..., a[...] + 1),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // 128,),
        in_specs=[spec],
        out_specs=spec,
    )
    return jax.lax.fori_loop(0, n[0], lambda i, y: call(y), x)


def test_a_dynamic_trip_count_around_a_call_comes_from_the_inputs():
    def make(case, key):
        return jnp.ones((256, 128), jnp.float32), jnp.array([3], jnp.int32)

    model = analyze_case(_adhoc(_looped, make), ADHOC, ["v5e"])
    assert model.status == "ok", model.reason
    (call,) = model.calls
    assert call.count == 3
    assert model.grid_steps == 3 * 2
    assert model.hbm_bytes == 3 * 2 * 256 * 128 * 4


def _pipelined_add(x, w):
    """A grid-less call over ANY refs running emit_pipeline: x's block moves every inner
    step, w's block never does (fetched once), the output's moves every step."""

    def kernel(x_hbm, w_hbm, o_hbm):
        def inner(x_ref, w_ref, o_ref):
            o_ref[...] = x_ref[...] + w_ref[...]

        rows = pl.BlockSpec((128, 128), lambda i: (i, 0))
        fixed = pl.BlockSpec((128, 128), lambda i: (0, 0))
        pltpu.emit_pipeline(
            inner, grid=(x_hbm.shape[0] // 128,), in_specs=[rows, fixed], out_specs=rows
        )(x_hbm, w_hbm, o_hbm)

    any_spec = pl.BlockSpec(memory_space=pl.ANY)
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[any_spec, any_spec],
        out_specs=any_spec,
    )(x, w)


@pytest.mark.parametrize("name", ["v5e", "7x", "8i"])
def test_emit_pipeline_copies_are_counted_at_the_steps_that_make_them(name):
    # Traced as the chip (emit_pipeline asks jax for it); 4 inner steps: x 4 x 64 KiB, w
    # once (64 KiB: its block never changes), out 4 x 64 KiB. VMEM as jax allocates it: 2
    # buffers for x and out, 1 for w (its block is its whole array): 5 x 64 KiB.
    def make(case, key):
        return jnp.ones((512, 128), jnp.float32), jnp.ones((128, 128), jnp.float32)

    model = analyze_case(_adhoc(_pipelined_add, make), ADHOC, [name])
    assert model.status == "ok", model.reason
    assert model.hbm_bytes == (4 + 1 + 4) * 64 * KIB
    assert model.vmem_bytes == 5 * 64 * KIB
    # Each inner step is charged a grid step's fixed cost, as the one outer step is.
    assert model.chips[name].overhead_us == pytest.approx(0.35 * (1 + 4))
    assert "a loop's conditionals (emit_pipeline's copies) evaluated at every iteration" in (
        model.notes
    )


def test_only_the_input_the_model_reads_is_built_and_never_past_the_budget():
    """Issue 51: the group sizes a grouped matmul's index maps read are built alone (jax
    drops the operands' work no output needs), so a case whose operands pass the budget is
    still modelled; an input past the budget itself is refused."""
    from ci_bench.measure.model import trace

    built = []

    def make(case, key):
        arrays = _gmm_inputs([128] * 4)(case, key)
        if not isinstance(arrays[0], jax.core.Tracer):  # eager: every array allocated
            built.append(True)
        return arrays

    fn = functools.partial(megablox.gmm, tiling=(128, 128, 128))
    closed, inputs = trace(_adhoc(fn, make), ADHOC, 42, budget=1024)
    assert closed is not None
    assert not built  # tracing is abstract: nothing allocated
    sizes = inputs(2)  # 16 bytes of group sizes; the operands beside them are 0.75 MiB
    assert sizes.tolist() == [128] * 4
    assert not built  # built under jit: the operands were never allocated
    with pytest.raises(ValueError, match=r"input 0's real values .* past the model's budget"):
        inputs(0)
    assert not built


def test_a_vector_kernel_gets_no_mxu_flops_check():
    from ci_bench.contract.spec import Case
    from tests.fixtures.emit_pipeline_kernel import SPEC

    assert SPEC.compute_unit == "vector"
    model = analyze_case(SPEC, Case("emit_pipeline", {"R": 512}, "float32"), ["v5e"])
    assert model.flops == 0  # no dot: the SPEC's FLOPs are VPU work
    assert model.flops_check is None  # never "mismatch"


def _nested_pipeline(x):
    """emit_pipeline inside a gridded call: each outer step pipelines its own half of the
    rows; the inner index map reads the outer program id."""

    def kernel(x_hbm, o_hbm):
        i = pl.program_id(0)

        def inner(x_ref, o_ref):
            o_ref[...] = x_ref[...] * 2

        spec = pl.BlockSpec((128, 128), lambda j: (i * 2 + j, 0))
        pltpu.emit_pipeline(inner, grid=(2,), in_specs=[spec], out_specs=spec)(x_hbm, o_hbm)

    any_spec = pl.BlockSpec(memory_space=pl.ANY)
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(2,),
        in_specs=[any_spec],
        out_specs=any_spec,
    )(x)


def test_emit_pipeline_nested_in_a_gridded_call_reads_the_outer_program_id():
    # 2 outer steps x 2 inner steps, each block read once and written once: 512 KiB; each
    # outer step and each inner step charged the step overhead: 2 x (1 + 2) x 0.35 µs.
    model = analyze_case(
        _adhoc(_nested_pipeline, lambda c, k: jnp.ones((512, 128), jnp.float32)), ADHOC, ["v5e"]
    )
    assert model.status == "ok", model.reason
    assert model.grid_steps == 2
    assert model.hbm_bytes == 2 * 512 * 128 * 4
    assert model.chips["v5e"].overhead_us == pytest.approx(2 * 3 * 0.35)
    assert "a conditional in the body: its costliest branch counted" not in model.notes


def _counted_dots(counts, x):
    """Grid step i runs counts[i] dots: a body loop whose trip count is read from SMEM."""

    def kernel(counts_ref, x_ref, o_ref):
        def body(_, acc):
            return acc + jnp.dot(x_ref[...], x_ref[...], preferred_element_type=jnp.float32)

        n = counts_ref[pl.program_id(0)]
        o_ref[...] = jax.lax.fori_loop(0, n, body, jnp.zeros((128, 128), jnp.float32))

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(4,),
        in_specs=[pl.BlockSpec((128, 128), lambda i, c: (0, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i, c: (i, 0)),
    )
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((512, 128), jnp.float32), grid_spec=grid_spec
    )(counts, x)


def test_a_body_loops_trip_count_read_from_scalar_prefetch_at_every_step():
    # counts (1, 2, 3, 6): 12 dots of 2·128³ in all, not one per step and not "partial".
    def make(case, key):
        return jnp.array([1, 2, 3, 6], jnp.int32), jnp.ones((128, 128), jnp.bfloat16)

    model = analyze_case(_adhoc(_counted_dots, make), ADHOC, ["v5e"])
    assert model.status == "ok", model.reason
    assert model.flops == 12 * 2 * 128**3
    assert "a while loop's trip count read from the case's inputs at every grid step" in (
        model.notes
    )


def _exclusive_whens(x):
    """splash attention's backward without a mask: two ``pl.when``s on predicates computed
    from Python constants (``jnp.logical_and(False, True)`` and its complement), each the
    same dot; exactly one runs."""
    masked = False

    def kernel(x_ref, o_ref):
        @pl.when(jnp.logical_and(jnp.logical_not(masked), True))
        def _():
            o_ref[...] = jnp.dot(x_ref[...], x_ref[...], preferred_element_type=jnp.float32)

        @pl.when(jnp.logical_and(masked, True))
        def _():
            o_ref[...] = jnp.dot(x_ref[...], x_ref[...], preferred_element_type=jnp.float32)

    spec = pl.BlockSpec((128, 128), lambda i: (i, 0))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),
        grid=(2,),
        in_specs=[spec],
        out_specs=spec,
    )(x)


def test_a_conditional_on_constants_counts_the_branch_it_takes_never_both_whens():
    """Issue 39: each constant predicate was a conditional the model could not read, its
    costliest branch counted in both: twice the dots (tokamax's full-mask attention
    backward modelled ten matmuls of work for five)."""
    make = lambda c, k: jnp.ones((256, 128), jnp.bfloat16)  # noqa: E731
    model = analyze_case(_adhoc(_exclusive_whens, make), ADHOC, ["v5e"])
    assert model.status == "ok", model.reason
    assert model.flops == 2 * (2 * 128**3)  # 2 steps x one (128, 128) @ (128, 128) dot
    assert "a conditional in the body: its costliest branch counted" not in model.notes
