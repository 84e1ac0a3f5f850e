"""The cost model against hand-computed HBM bytes, re-read factors, steps and VMEM.

Every expectation below is worked out from the kernel's grid and BlockSpecs by hand (the
arithmetic is in the comments), then compared with what ``analyze_case`` reads from the
traced program. Nothing is executed.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.measure.model import analyze_case
from ci_bench.measure.model.chips import chip
from ci_bench.measure.model.dma import EDGE_NOTE
from kernels.gla import SPEC as GLA
from kernels.gla import forward_tpu
from kernels.gla.kernel import chunk_gla
from kernels.matmul import SPEC as MATMUL
from kernels.matmul import BlockSizes, matmul_tiled
from tests.harness.factories import adhoc_spec

KIB = 1024
MIB = 1024 * KIB


def _matmul(bm: int, bk: int, bn: int) -> KernelSpec:
    blocks = BlockSizes(block_m=bm, block_k=bk, block_n=bn)
    return dataclasses.replace(MATMUL, pallas=functools.partial(matmul_tiled, block_sizes=blocks))


def _square(n: int, dtype: str = "bfloat16") -> Case:
    return Case("matmul", {"B": 1, "M": n, "K": n, "N": n}, dtype)


def _adhoc(fn, make, flops=lambda c: 0) -> KernelSpec:
    """A SPEC around any callable, for kernels written in the test."""
    return adhoc_spec(fn, make, "float32", flops)


ADHOC = Case("adhoc", {"N": 1}, "float32")


# M = K = N = 512 bfloat16 (each operand 512 KiB). Grid (1, M/bm, N/bn, K/bk), K fastest:
#   a's block (i, k) changes every step unless K/bk = 1 and i is constant: a is read N/bn
#   times; b's block (k, j) likewise M/bm times; the output is written once.
#   VMEM: 2 buffers of each bf16 block + the f32 (bm, bn) accumulator; one buffer of a
#   block that is the same at every step (model revision 7, as Mosaic allocates it); the
#   left operand's staged copy (revision 8) is within the register file at these tiles.
@pytest.mark.parametrize(
    ("blocks", "steps", "hbm", "vmem", "reread"),
    [
        # 4·4·4 steps; a 4x, b 4x: 2 + 2 + 0.5 MiB; 2·(32+32+32) KiB + 64 KiB.
        ((128, 128, 128), 64, 4.5 * MIB, 256 * KIB, "args[0] (4x)"),
        # 2·4·4 steps; a 4x (N/bn), b 2x (M/bm): 2 + 1 + 0.5 MiB;
        # 2·(64 + 32 + 64) KiB + 128 KiB.
        ((256, 128, 128), 32, 3.5 * MIB, 448 * KIB, "args[0] (4x)"),
        # 8·4·4 steps; a 4x, b 8x: 2 + 4 + 0.5 MiB; 2·(16 + 32 + 16) KiB + 32 KiB.
        ((64, 128, 128), 128, 6.5 * MIB, 160 * KIB, "args[1] (8x)"),
        # 4·1·1 steps; a once (i changes, k fixed), b once (constant block), out once:
        # 1.5 MiB = ideal; 2·(128 + 128) KiB + 512 KiB (b: one buffer); the accumulator
        # lives within the one k step, forwarded to one (128, 128) float32 column: 64 KiB
        # (libtpu compiling for a v5e needs 1.02 MiB; revision 7 counted 1280 KiB).
        ((128, 512, 512), 4, 1.5 * MIB, 1088 * KIB, None),
    ],
)
def test_matmul_bytes_vmem_and_the_reread_operand_at_several_tilings(
    blocks, steps, hbm, vmem, reread
):
    model = analyze_case(_matmul(*blocks), _square(512), ["v5e"])
    assert model.status == "ok", model.reason
    assert model.grid_steps == steps
    assert model.hbm_bytes == hbm
    assert model.ideal_bytes == 1.5 * MIB
    assert model.vmem_bytes == vmem
    (call,) = model.calls
    assert call.reread_operand == reread
    assert model.flops == 2 * 512**3 == model.spec_flops
    assert model.flops_check == "ok"
    assert model.chips["v5e"].fits


def test_float32_blocks_double_the_bytes_and_the_same_grid():
    model = analyze_case(_matmul(128, 128, 128), _square(512, "float32"), ["v5e"])
    assert model.hbm_bytes == 9 * MIB
    # Two buffers of each block; a float32 output accumulates in its own block (0.2.0): no
    # float32 scratch beside it.
    assert model.vmem_bytes == 2 * 3 * 64 * KIB


def test_unaligned_shapes_are_modelled_on_the_padded_arrays_and_flagged_near_2x_work():
    # 513 pads to 640 = 5 blocks: 640³ / 513³ = 1.94x the SPEC's FLOPs (under the 2x flag).
    model = analyze_case(_matmul(128, 128, 128), _square(513), ["v5e"])
    assert model.grid_steps == 5**3
    assert model.flops == 2 * 640**3
    assert model.flops_ratio == pytest.approx(640**3 / 513**3)
    assert model.flops_check == "ok"
    case_129 = Case("matmul", {"B": 1, "M": 129, "K": 129, "N": 129}, "float32")
    smaller = analyze_case(_matmul(128, 128, 128), case_129, ["v5e"])
    assert smaller.flops_check == "mismatch"  # 256³ of work for a 129³ matmul: 7.8x
    # Tiles that cover a dimension make one block of all of it (matmul 0.8.0): no padding.
    whole = analyze_case(MATMUL, case_129, ["v5e"])
    assert (whole.grid_steps, whole.flops, whole.flops_check) == (1, 2 * 129**3, "ok")


def _gla(chunk: int) -> KernelSpec:
    return dataclasses.replace(
        GLA, pallas=lambda q, k, v, g: chunk_gla(q, k, v, g, chunk_size=chunk)
    )


@pytest.mark.parametrize(
    ("chunk", "steps", "vmem"),
    [
        # grid (B, H, T/C) = (1, 2, 4); five (64, 64) bf16 blocks padded to (64, 128) lanes
        # (16 KiB), the TPU body's 0/1 matrices (8-row diagonal blocks: three [512, 64]
        # padded to 128 lanes, one [64, 512], two [64, 64]), 2 buffers of each block that
        # moves and one of each matrix (the same block at every step), + the f32 (V, K)
        # state: 32 KiB.
        (64, 8, (2 * 5 * 16 + 3 * 128 + 64 + 2 * 16) * KIB + 32 * KIB),
        # (1, 2, 8); (32, 64) blocks padded to (32, 128): 8 KiB each.
        (32, 16, (2 * 5 * 8 + 3 * 64 + 16 + 2 * 8) * KIB + 32 * KIB),
    ],
)
def test_gla_tpu_variant_reads_each_tensor_once_at_several_chunk_sizes(chunk, steps, vmem):
    case = Case("gla", {"B": 1, "T": 256, "H": 2, "K": 64, "V": 64}, "bfloat16")
    model = analyze_case(_gla(chunk), case, ["v5e"])
    assert model.status == "ok", model.reason
    (call,) = model.calls
    # The TPU branch of platform_dependent: grid (B, H, chunks), not the GPU (B, H).
    assert call.grid == [1, 2, 256 // chunk]
    assert model.grid_steps == steps
    # q, k, v, g read and o written once: 5 x (1·2·256·64·2 B) = 320 KiB; the 0/1
    # matrices (bf16) once, their block index never changes.
    masks = sum(m.size * 2 for m in forward_tpu.masks(chunk, forward_tpu.DIAG))
    assert model.hbm_bytes == model.ideal_bytes == 5 * 64 * KIB + masks
    assert all(o.reread == 1.0 for o in call.operands)
    assert model.vmem_bytes == vmem
    # The MXU work the body issues, per chunk (bf16: one pass a dot): the in-chunk and
    # within-block cumulative gates and the reference (three [C, C] x [C, K] 0/1 gathers),
    # the placing of the pairs' scores ([C, C·s] x [C·s, C]), C/s - 1 off-diagonal [s, K] x
    # [K, C] products, the output's two products and the state's one. Since 0.7.0 the pairs'
    # rows are not gathered (vector work), so this is no longer always past 2x the SPEC's
    # useful FLOPs, and the check says which it is.
    C, K, V, s = chunk, 64, 64, forward_tpu.DIAG
    per_chunk = 3 * C * C * K + C * C * s * C + (C // s - 1) * s * K * C + 2 * C * K * V
    per_chunk += C * C * V
    assert model.flops == 2 * per_chunk * (1 * 2 * 256 // chunk)
    assert model.flops_check == ("ok" if model.flops <= 2 * GLA.flops(case) else "mismatch")


def test_jaxs_own_tpu_matmul_is_modelled_from_its_blockspecs():
    from jax.experimental.pallas.ops.tpu import matmul as jax_matmul

    def make(case, key):
        return (jnp.ones((1024, 1024), jnp.bfloat16),) * 2

    fn = functools.partial(jax_matmul.matmul, block_shape=(256, 512), block_k=256)
    model = analyze_case(_adhoc(fn, make, lambda c: 2 * 1024**3), ADHOC, ["v5e"])
    (call,) = model.calls
    # grid (4, 2, 4): x read N/r = 2x (4 MiB), y M/l = 4x (8 MiB), out once (2 MiB).
    assert call.grid == [4, 2, 4]
    assert model.hbm_bytes == 14 * MIB
    assert call.reread_operand == "args[1] (4x)"
    # 2 x (128 + 256 + 256) KiB of blocks + the (256, 512) f32 accumulator (512 KiB).
    assert model.vmem_bytes == 1792 * KIB
    assert model.flops_ratio == 1.0


@pytest.mark.parametrize("causal", [False, True])
def test_jaxs_flash_attention_rereads_keys_per_query_block_and_causal_skips(causal):
    from jax.experimental.pallas.ops.tpu import flash_attention

    def make(case, key):
        return tuple(jnp.ones((1, 8, 2048, 128), jnp.bfloat16) for _ in range(3))

    fn = functools.partial(flash_attention.flash_attention, causal=causal)
    model = analyze_case(_adhoc(fn, make), ADHOC, ["v5e"])
    (call,) = model.calls
    assert call.grid == [1, 8, 16, 16]
    k_copies = {o.origin: o.copies for o in call.operands}["args[1]"]
    # Non-causal: every (head, q block) walks all 16 kv blocks: 8·16·16 copies. Causal:
    # skipped blocks map to block 0 (the next one needed), so per head q block i copies
    # blocks 1..i and returns to 0: 1 + sum(i + 1 for i in 1..14) + 15 = 135.
    assert k_copies == (8 * 16 * 16 if not causal else 8 * 135)
    head = 2048 * 128 * 2  # one head of q, k, v or o
    assert model.ideal_bytes == 4 * 8 * head
    assert model.hbm_bytes == 8 * head * 2 + 2 * k_copies * 128 * 128 * 2


def _gather(idx, x):
    def kernel(idx_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...]

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((idx.shape[0] * 8, 128), x.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(idx.shape[0],),
            in_specs=[pl.BlockSpec((8, 128), lambda i, idx: (idx[i], 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, idx: (i, 0)),
        ),
    )(idx, x)


def test_scalar_prefetch_index_maps_are_evaluated_with_the_real_inputs():
    def make(case, key):
        idx = jnp.array([0, 0, 1, 1, 3, 3, 3, 0], jnp.int32)
        return idx, jax.random.normal(key, (32, 128), jnp.float32)

    model = analyze_case(_adhoc(_gather, make), ADHOC, ["v5e"])
    (call,) = model.calls
    x, out = call.operands
    # Blocks 0, 0, 1, 1, 3, 3, 3, 0: copied when the index changes, 4 times of 8 steps.
    assert (x.copies, x.hbm_bytes) == (4, 4 * 8 * 128 * 4)
    assert (out.copies, out.hbm_bytes) == (8, 8 * 8 * 128 * 4)
    assert call.smem_bytes == 8 * 4  # the prefetched int32 indices live in SMEM


def _manual_copy(x):
    def kernel(x_hbm, o_ref, buf, sem):
        def body(i, carry):
            copy = pltpu.make_async_copy(x_hbm.at[pl.ds(i * 8, 8)], buf, sem)
            copy.start()
            copy.wait()
            o_ref[pl.ds(i * 8, 8), :] = buf[...] * 2
            return carry

        jax.lax.fori_loop(0, 4, body, 0)

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA],
    )(x)


def test_manual_dmas_are_counted_at_their_static_sizes_and_trip_counts():
    model = analyze_case(_adhoc(_manual_copy, lambda c, k: (jnp.ones((32, 128)),)), ADHOC, ["v5e"])
    (call,) = model.calls
    assert call.manual_dma_bytes == 4 * 8 * 128 * 4  # 4 copies of (8, 128) f32
    x = call.operands[0]
    assert (x.memory_space, x.copies, x.reread) == ("any", 0, None)
    # Output block (32, 128) f32, one buffer (a grid-less call: nothing to pipeline,
    # 16 KiB) + the (8, 128) f32 buffer.
    assert call.vmem_bytes == 16 * KIB + 4 * KIB
    assert model.hbm_bytes == 16 * KIB + 16 * KIB


def _dynamic_write_back(x, n):
    """tokamax's fused-loss backward pattern: a VMEM tile's slice of a size read at run time
    (``tile.at[pl.ds(0, n)]``) copied into a slice of a large HBM output."""

    def kernel(n_ref, x_ref, o_hbm, tile, sem):
        size = n_ref[0]
        tile[...] = x_ref[...] * 2
        i = pl.program_id(0)
        copy = pltpu.make_async_copy(
            tile.at[pl.ds(0, size)], o_hbm.at[pl.ds(i * 8, size), pl.ds(0, 128)], sem
        )
        copy.start()
        copy.wait()

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((4096, 1024), jnp.float32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(4,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, n: (i, 0))],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA],
        ),
    )(n, x)


def test_a_dynamic_copy_is_bounded_by_its_tighter_side_never_the_whole_hbm_array():
    """Both sides of a copy move the same bytes: a dynamic slice of an (8, 128) tile written
    into a dynamic slice of a 16 MiB HBM array is at most the tile (4 KiB), an upper bound
    said as one. Bounding by the HBM side counted the whole array per copy (issue 39:
    tokamax's fused-loss backward modelled 128x its measured time)."""
    make = lambda c, k: (jnp.ones((32, 128)), jnp.array([8], jnp.int32))  # noqa: E731
    model = analyze_case(_adhoc(_dynamic_write_back, make), ADHOC, ["v5e"])
    (call,) = model.calls
    assert call.manual_dma_bytes == 4 * 8 * 128 * 4  # 4 steps x one (8, 128) f32 tile
    assert EDGE_NOTE in model.notes


def _copy_call(x, buffers=None, steps=4):
    mode = {} if buffers is None else {"pipeline_mode": pl.Buffered(buffers)}

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(steps,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0), **mode)],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x)


@pytest.mark.parametrize(
    ("buffers", "vmem"), [(None, 4 * 4 * KIB), (1, 3 * 4 * KIB), (3, 5 * 4 * KIB)]
)
def test_pipeline_mode_sets_the_buffer_count(buffers, vmem):
    fn = functools.partial(_copy_call, buffers=buffers)
    model = analyze_case(_adhoc(fn, lambda c, k: (jnp.ones((32, 128)),)), ADHOC, ["v5e"])
    assert model.vmem_bytes == vmem


def test_a_call_in_a_scan_counts_its_trip_count_and_cond_takes_the_costlier_branch():
    def scanned(x):
        def step(carry, _):
            return _copy_call(carry), None

        return jax.lax.scan(step, x, None, length=3)[0]

    model = analyze_case(_adhoc(scanned, lambda c, k: (jnp.ones((32, 128)),)), ADHOC, ["v5e"])
    (call,) = model.calls
    assert call.count == 3
    assert model.grid_steps == 3 * 4
    assert model.hbm_bytes == 3 * 2 * 16 * KIB

    def branchy(x, flag):
        big = lambda x: _copy_call(jnp.concatenate([x, x]), steps=8)[:32]  # noqa: E731
        return jax.lax.cond(flag[0] > 0, big, _copy_call, x)

    make = lambda c, k: (jnp.ones((32, 128)), jnp.ones((1,)))  # noqa: E731
    model = analyze_case(_adhoc(branchy, make), ADHOC, ["v5e"])
    assert model.grid_steps == 8
    assert model.hbm_bytes == 2 * 32 * KIB
    assert any("costliest" in n for n in model.notes)


def test_megacore_splits_the_outer_parallel_dimension_and_refetches_shared_blocks():
    def with_table(x, table):
        def kernel(x_ref, t_ref, o_ref):
            o_ref[...] = x_ref[...] + t_ref[...]

        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(4,),
            in_specs=[
                pl.BlockSpec((8, 128), lambda i: (i, 0)),
                pl.BlockSpec((8, 128), lambda i: (0, 0)),  # the same block every step
            ],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
        )(x, table)

    make = lambda c, k: (jnp.ones((32, 128)), jnp.ones((8, 128)))  # noqa: E731
    model = analyze_case(_adhoc(with_table, make), ADHOC, ["v5e", "v5p"])
    block = 8 * 128 * 4
    # One TensorCore: the table block is fetched once. v5p's two cores run steps 0-1 and
    # 2-3: each fetches it.
    assert model.hbm_bytes == model.chips["v5e"].hbm_bytes == (4 + 1 + 4) * block
    assert model.chips["v5p"].hbm_bytes == (4 + 2 + 4) * block
    assert model.chips["v5p"].tensor_cores == 2
    assert model.chips["v5e"].tensor_cores == 1


def test_the_modelled_time_is_the_step_sum_of_compute_plus_overhead_or_dma():
    v5e = chip("v5e")
    model = analyze_case(_matmul(128, 128, 128), _square(512), ["v5e"])
    block = 128 * 128 * 2
    compute = 2 * 128**3 / v5e.bf16_flops_per_s
    busy = compute + v5e.step_overhead_us * 1e-6
    in_flight = 3 * block / v5e.model_hbm_bytes_per_s  # next a and b, plus one written output
    assert busy > in_flight  # 128-blocks on v5e: the step overhead dominates
    # 64 steps of (compute + overhead); the first fetch (a, b) and the last write-back.
    expected = 64 * busy + 2 * block / v5e.model_hbm_bytes_per_s + block / v5e.model_hbm_bytes_per_s
    assert model.chips["v5e"].modelled_us == pytest.approx(expected * 1e6)
    assert model.chips["v5e"].bound == "overhead"
    assert model.chips["v5e"].overhead_us == pytest.approx(64 * 0.35)


def test_the_mxu_is_charged_at_the_measured_rate_where_one_is_published_the_mfu_at_the_peak():
    """7x's MXU time is its FLOPs over Google's measured dense-GEMM rate (956.4 TFLOP/s per
    device, docs/MODEL.md); a chip without a published measurement keeps jax's peak; the
    MFU ceiling divides by the datasheet peak on both."""
    model = analyze_case(_matmul(512, 512, 512), _square(2048), ["7x", "v6e"])
    flops = 2 * 2048**3
    seven, six = model.chips["7x"], model.chips["v6e"]
    assert chip("7x").mxu_flops_per_s == pytest.approx(956.3824592e12)
    assert seven.compute_us == pytest.approx(flops / 956.3824592e12 * 1e6)
    assert six.compute_us == pytest.approx(flops / chip("v6e").bf16_flops_per_s * 1e6)
    peak = chip("7x").bf16_flops_per_s
    assert seven.mfu_ceiling == pytest.approx(flops / (seven.modelled_us * 1e-6 * peak))


def test_a_kernel_without_pallas_call_is_not_modelled_with_its_reason():
    spec = dataclasses.replace(MATMUL, pallas=jnp.matmul)
    model = analyze_case(spec, _square(256), ["v5e"])
    assert model.status == "not_modelled"
    assert "no pallas_call" in model.reason
    assert model.hbm_bytes is None  # never zero


def test_a_broken_kernel_is_not_modelled_never_an_exception():
    def broken(a, b):
        raise RuntimeError("kernel exploded at trace time")

    model = analyze_case(dataclasses.replace(MATMUL, pallas=broken), _square(256), ["v5e"])
    assert model.status == "not_modelled"
    assert "kernel exploded" in model.reason


def test_the_gpu_lowering_traffic_is_an_upper_bound_without_revisit_elision():
    model = analyze_case(_matmul(128, 128, 128), _square(512), ["v5e"])
    # Triton grid (1, 4, 4): each program loads a (128, 512) a-row and a (512, 128)
    # b-column and stores one (128, 128) block: 16 x (128 + 128 + 32) KiB.
    assert model.gpu is not None
    assert model.gpu.grid_steps == 16
    assert model.gpu.hbm_bytes == 16 * (128 + 128 + 32) * KIB
    assert "upper bound" in model.gpu.label


@jax.custom_vjp
def _vjp_copy(x):
    return _copy_call(x)


_vjp_copy.defvjp(lambda x: (_copy_call(x), None), lambda _, g: (_copy_call(g),))


@pytest.mark.parametrize(
    ("wrap", "calls", "steps"),
    [
        (lambda f: f, 1, 4),
        (jax.checkpoint, 1, 4),
        (lambda f: _vjp_copy, 1, 4),
        (lambda f: jax.grad(lambda x: _vjp_copy(x).sum()), 2, 8),  # forward and backward
        (lambda f: lambda x: jax.vmap(f)(jnp.stack([x, x])), 1, 8),  # vmap adds a grid dim
    ],
)
def test_the_walk_goes_into_remat_custom_vjp_grad_and_vmap(wrap, calls, steps):
    fn = wrap(_copy_call)
    model = analyze_case(_adhoc(fn, lambda c, k: (jnp.ones((32, 128)),)), ADHOC, ["v5e"])
    assert model.status == "ok", model.reason
    assert len(model.calls) == calls
    assert model.grid_steps == steps
    assert model.hbm_bytes == steps * 2 * 4 * KIB  # every step reads and writes one block


def _scalar_copy(x):
    def kernel(x_hbm, o_ref, scalar, sem):
        copy = pltpu.make_async_copy(x_hbm, scalar, sem)  # a whole rank-0 ref: shape ()
        copy.start()
        copy.wait()
        o_ref[...] = jnp.zeros_like(o_ref) + scalar[...]

    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        scratch_shapes=[pltpu.VMEM((), jnp.float32), pltpu.SemaphoreType.DMA],
    )(x)


def test_a_scalar_copy_is_exact_never_a_copy_of_dynamic_size():
    model = analyze_case(_adhoc(_scalar_copy, lambda c, k: (jnp.ones(()),)), ADHOC, ["v5e"])
    assert model.status == "ok", model.reason
    assert model.calls[0].manual_dma_bytes == 4
    assert EDGE_NOTE not in model.notes
