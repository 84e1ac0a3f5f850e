from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ci_bench.contract.spec import Case
from kernels.matmul import SPEC, BlockSizes, matmul_tiled, reference

SHAPES = [
    (1, 128, 128, 128),  # aligned, 2-D
    (1, 256, 384, 128),  # aligned, several K blocks
    (1, 127, 127, 127),  # specification's unaligned size
    (1, 513, 513, 513),  # specification's unaligned size
    (1, 127, 513, 255),  # every dimension unaligned and different
    (4, 128, 256, 128),  # batched
    (3, 33, 200, 17),  # batched and unaligned
]


@pytest.mark.parametrize("backend", ["tpu", "gpu"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B{}-M{}-K{}-N{}".format(*s))
def test_matches_reference_on_every_element(shape, dtype, backend):
    case = Case("matmul", dict(zip("BMKN", shape, strict=True)), dtype)
    a, b = SPEC.make_inputs(case, jax.random.PRNGKey(0))
    out = matmul_tiled(a, b, backend=backend)
    ref = reference(a, b)
    assert out.shape == ref.shape
    assert out.dtype == jnp.dtype(dtype)
    tol = SPEC.tolerances[dtype]
    np.testing.assert_allclose(
        np.asarray(out, np.float32), np.asarray(ref), atol=tol.atol, rtol=tol.rtol
    )


def test_float32_is_accurate_far_below_the_tolerance_on_cpu():
    case = Case("matmul", {"B": 1, "M": 127, "K": 513, "N": 255}, "float32")
    a, b = SPEC.make_inputs(case, jax.random.PRNGKey(1))
    err = jnp.max(jnp.abs(matmul_tiled(a, b) - reference(a, b)))
    assert float(err) < 1e-4


def test_custom_block_sizes_are_used_and_still_exact():
    case = Case("matmul", {"B": 1, "M": 200, "K": 300, "N": 260}, "float32")
    a, b = SPEC.make_inputs(case, jax.random.PRNGKey(2))
    out = matmul_tiled(a, b, block_sizes=BlockSizes(block_m=32, block_k=256, block_n=256))
    np.testing.assert_allclose(out, reference(a, b), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize(
    ("K", "block_k"),
    [
        # A K the tile covers is one whole block (0.8.0): no mask, Mosaic's own edge.
        (513, 1024),
        # Several blocks, the last past K: masked there.
        (684, 384),  # two of 384, the last holding 300: an aligned head of 256, 44 in the strip
        (1153, 640),  # two of 640, the last holding 513: head 512, one valid column
        (700, 256),  # three of 256, the last holding 188: head 128, 60 in the strip
        (228, 128),  # two of 128, the last holding 100: no aligned head, the strip is all
    ],
)
@pytest.mark.parametrize(("dtype", "tolerance"), [("float32", 1e-4), ("bfloat16", 2e-2)])
def test_the_k_tail_is_zeroed_past_k_in_every_operand_layout(
    K, block_k, transpose_a, transpose_b, dtype, tolerance
):
    """The interpreter reads garbage past an array's end, as a TPU may: a mask that missed a
    column of the edge strip, or cut the aligned head short, gives O(1) errors; bfloat16
    accumulates in a float32 scratch and stores it cast."""
    key_a, key_b = jax.random.split(jax.random.PRNGKey(4))
    a = jax.random.normal(key_a, (2, 136, K), jnp.float32).astype(dtype)
    b = (jax.random.normal(key_b, (2, K, 200), jnp.float32) * K**-0.5).astype(dtype)
    stored_a = jnp.swapaxes(a, 1, 2) if transpose_a else a
    stored_b = jnp.swapaxes(b, 1, 2) if transpose_b else b
    blocks = BlockSizes(block_m=128, block_k=block_k, block_n=128)
    out = matmul_tiled(
        stored_a, stored_b, block_sizes=blocks, transpose_a=transpose_a, transpose_b=transpose_b
    )
    assert out.dtype == jnp.dtype(dtype)
    np.testing.assert_allclose(
        out.astype(jnp.float32), reference(a, b), atol=tolerance, rtol=tolerance
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"block_m": 0}, "positive"),
        ({"block_m": 24}, "multiple of 16"),
        ({"block_k": 100}, "multiple of 128"),
        ({"block_n": 64}, "multiple of 128"),
    ],
)
def test_block_sizes_are_validated(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BlockSizes(**kwargs)


def test_gpu_needs_power_of_two_blocks():
    a = jnp.ones((128, 128))
    with pytest.raises(ValueError, match="power of two"):
        matmul_tiled(a, a, block_sizes=BlockSizes(block_m=48), backend="gpu")


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [((4, 8), (9, 4)), ((2, 4, 8), (8, 4)), ((2, 4, 8), (3, 8, 4)), ((8,), (8,))],
)
def test_incompatible_shapes_are_rejected(a_shape, b_shape):
    with pytest.raises(ValueError, match="shapes"):
        matmul_tiled(jnp.ones(a_shape), jnp.ones(b_shape))


def test_cost_model_follows_the_specification():
    case = Case("matmul", {"B": 4, "M": 1024, "K": 512, "N": 256}, "bfloat16")
    assert SPEC.flops(case) == 2 * 4 * 1024 * 512 * 256
    assert SPEC.bytes_accessed(case) == 4 * (1024 * 512 + 512 * 256 + 1024 * 256) * 2


def test_backward_tiles_are_per_problem_dimension_and_keep_the_forward_block_shapes():
    from kernels.matmul.backward import backward_tiles

    tiles = BlockSizes(block_m=1024, block_k=128, block_n=512)
    da, db = backward_tiles(tiles)
    # dA = g·Bᵀ is [M,N]x[N,K]: M by block_m, N (contracted) by block_n, K by block_k.
    assert da == BlockSizes(block_m=1024, block_k=512, block_n=128)
    # dB = Aᵀ·g is [K,M]x[M,N]: K by block_k, M (contracted) by block_m, N by block_n.
    assert db == BlockSizes(block_m=128, block_k=1024, block_n=512)
    forward = {(1024, 128), (128, 512), (1024, 512)}  # a, b and the output's blocks
    for t in (da, db):
        blocks = {(t.block_m, t.block_k), (t.block_k, t.block_n), (t.block_m, t.block_n)}
        assert {tuple(sorted(b)) for b in blocks} == {tuple(sorted(b)) for b in forward}


def assert_exact_gradients(a, b, g, da, db, *, rtol: float, atol: float) -> None:
    """dA = g·Bᵀ and dB = Aᵀ·g, batched float32, against XLA's at HIGHEST precision."""
    exact = jax.lax.Precision.HIGHEST
    np.testing.assert_allclose(
        da, jnp.matmul(g, jnp.swapaxes(b, 1, 2), precision=exact), rtol, atol
    )
    np.testing.assert_allclose(
        db, jnp.matmul(jnp.swapaxes(a, 1, 2), g, precision=exact), rtol, atol
    )


def test_gradients_with_their_own_backward_tiles_are_exact_on_unaligned_shapes():
    from kernels.matmul import matmul

    key_a, key_b, key_g = jax.random.split(jax.random.PRNGKey(3), 3)
    a = jax.random.normal(key_a, (2, 200, 300), jnp.float32)
    b = jax.random.normal(key_b, (2, 300, 130), jnp.float32)
    g = jax.random.normal(key_g, (2, 200, 130), jnp.float32)
    forward, backward = BlockSizes(128, 128, 128), BlockSizes(256, 128, 256)
    _, pull = jax.vjp(lambda x, y: matmul(x, y, forward, backward), a, b)
    assert_exact_gradients(a, b, g, *pull(g), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("shapes", "tiles", "dtype", "tolerance"),
    [
        # Two or three blocks per dimension: each product has several output blocks and a
        # contraction of several steps, and g's block moves between and within them.
        (((3, 256, 384), (3, 384, 512)), (128, 128, 256), jnp.float32, 1e-5),
        (((3, 256, 384), (3, 384, 512)), (128, 128, 256), jnp.bfloat16, 2e-2),
        # 2-D, one block per dimension: the two products meet on the same g block.
        (((256, 256), (256, 384)), (256, 256, 384), jnp.bfloat16, 2e-2),
        # Batch entries folded into one step (batch_block): 4 x 128³ in one block.
        (((4, 128, 128), (4, 128, 128)), (512, 512, 1024), jnp.float32, 1e-5),
        # One product's contraction is one step, the other's two: a float32 accumulator
        # held through one product while the other's changes blocks.
        (((2, 256, 128), (2, 128, 256)), (128, 128, 256), jnp.bfloat16, 2e-2),
        (((2, 256, 128), (2, 128, 256)), (256, 128, 128), jnp.bfloat16, 2e-2),
    ],
)
def test_the_fused_backward_gives_exact_gradients(shapes, tiles, dtype, tolerance):
    from kernels.matmul import matmul
    from kernels.matmul.backward import fused_fits

    (a_shape, b_shape), blocks = shapes, BlockSizes(*tiles)
    *_, M, K = a_shape
    N = b_shape[-1]
    within = blocks.within(M, K, N)
    assert fused_fits(M, K, N, within.block_m, within.block_k, within.block_n)
    keys = jax.random.split(jax.random.PRNGKey(5), 3)
    a = jax.random.normal(keys[0], a_shape, jnp.float32).astype(dtype)
    b = jax.random.normal(keys[1], b_shape, jnp.float32).astype(dtype)
    g = jax.random.normal(keys[2], (*a_shape[:-1], N), jnp.float32).astype(dtype)
    _, pull = jax.vjp(lambda x, y: matmul(x, y, blocks, blocks), a, b)
    da, db = pull(g)
    exact = jax.lax.Precision.HIGHEST
    a32, b32, g32 = (x.astype(jnp.float32) for x in (a, b, g))
    want_da = jnp.matmul(g32, jnp.swapaxes(b32, -1, -2), precision=exact)
    want_db = jnp.matmul(jnp.swapaxes(a32, -1, -2), g32, precision=exact)
    for got, want in ((da, want_da), (db, want_db)):
        assert got.dtype == dtype
        assert got.shape == want.shape
        scale = float(jnp.abs(want).max())
        np.testing.assert_allclose(got.astype(jnp.float32), want, rtol=0, atol=tolerance * scale)


@pytest.mark.parametrize(("batch", "bb"), [(2, 1), (4, 2)])
def test_the_fused_backward_keeps_the_tpu_pipeline_rules(batch, bb):
    """jax's TPU interpreter (not the plain one) checks what the chip relies on: an output
    block is visited in consecutive steps only (written back when its index changes), so
    an output held at the wrong block through the other product fails here."""
    from jax.experimental.pallas import tpu as pltpu

    from kernels.matmul.backward import fused_backward

    keys = jax.random.split(jax.random.PRNGKey(6), 3)
    a = jax.random.normal(keys[0], (batch, 256, 384), jnp.float32)
    b = jax.random.normal(keys[1], (batch, 384, 512), jnp.float32)
    g = jax.random.normal(keys[2], (batch, 256, 512), jnp.float32)
    da, db = fused_backward(a, b, g, (128, 128, 256), bb, pltpu.InterpretParams())
    assert_exact_gradients(a, b, g, da, db, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize(
    ("shape", "tiles", "calls"),
    [
        ((1024, 1024), (1024, 256, 1024), 1),  # the tiles divide it: one fused call
        ((4, 256, 256), (128, 128, 128), 1),
        ((513, 513), (1024, 256, 1024), 2),  # K runs as partial blocks: two calls
        ((513, 513), (1024, 1024, 1024), 1),  # each dimension one whole block (0.8.0)
        ((127, 127), (128, 128, 128), 1),
        ((127, 255), (128, 128, 128), 2),  # 255 in two partial blocks of 128
    ],
)
def test_the_tpu_backward_is_one_call_where_the_tiles_divide_the_problem(shape, tiles, calls):
    from jax import export

    from kernels.matmul.backward import matmul_backward

    x = jax.ShapeDtypeStruct(shape, jnp.bfloat16)
    lowered = export.export(
        jax.jit(lambda a, b, g: matmul_backward(a, b, g, tiles=BlockSizes(*tiles))),
        platforms=["tpu"],
    )(x, x, x)
    assert lowered.mlir_module().count("tpu_custom_call") == calls


@pytest.mark.parametrize(("chip", "calls"), [(None, 2), ("v4", 2), ("v5e", 1)])
def test_the_fused_backward_raises_its_vmem_limit_only_within_the_chips_vmem(
    monkeypatch, chip, calls
):
    """float32 1024³: the fused call's blocks count 16 MiB, so it asks for 24. A v5e (128 MiB
    of VMEM) runs it as one call; off a TPU (what ``ci-bench lower`` checks against every
    chip) and on a v4 (16 MiB in all) the backward is two calls within the default limit."""
    from jax import export

    import ci_bench.measure.chip
    import kernels.matmul as package

    monkeypatch.setattr(ci_bench.measure.chip, "this_chip", lambda: chip)
    x = jax.ShapeDtypeStruct((1024, 1024), jnp.float32)

    def grads(a, b):
        return jax.grad(lambda a, b: package.pallas(a, b).sum(), argnums=(0, 1))(a, b)

    lowered = export.export(jax.jit(grads), platforms=["tpu"])(x, x)
    # The gradients alone: the forward's output is not needed, so only the backward lowers.
    assert lowered.mlir_module().count("tpu_custom_call") == calls


def test_the_subject_reads_the_backward_entry_of_the_tuned_file_else_the_forward_one(
    tmp_path, monkeypatch
):
    import shutil

    import ci_bench.measure.chip
    import kernels.matmul as package
    from kernels.matmul import VERSION

    name = f"matmul_v{VERSION}.tuned.v5e.json"
    shutil.copy(package.BASELINES / name, tmp_path / name)
    # One case's backward entry taken out of the copy (the shipped file holds every one the
    # ci profile runs): the fallback is the kernel's, whatever the shipped file holds.
    missing = "matmul/B4-M513-K513-N513/bfloat16"
    shipped = json.loads((tmp_path / name).read_text())
    shipped["cases"].pop(missing + "/backward", None)
    (tmp_path / name).write_text(json.dumps(shipped))
    monkeypatch.setattr(package, "BASELINES", tmp_path)
    monkeypatch.setattr(ci_bench.measure.chip, "this_chip", lambda: "v5e")
    seen: list[tuple[BlockSizes, BlockSizes]] = []
    monkeypatch.setattr(package, "matmul", lambda a, b, fwd, bwd, _: seen.append((fwd, bwd)))
    entries = json.loads((tmp_path / name).read_text())["cases"]

    def config(case_id: str) -> BlockSizes:
        return BlockSizes(**entries[case_id]["config"])

    square = jnp.zeros((1024, 1024), jnp.bfloat16)
    package.pallas(square, square)
    case = "matmul/B1-M1024-K1024-N1024/bfloat16"
    assert seen[-1] == (config(case), config(case + "/backward"))
    assert seen[-1][0] != seen[-1][1]  # the chip chose different tiles for each
    # A case whose backward the file does not hold: the backward takes the forward's tiles.
    assert missing in entries
    assert missing + "/backward" not in entries
    unaligned = jnp.zeros((4, 513, 513), jnp.bfloat16)
    package.pallas(unaligned, unaligned)
    assert seen[-1] == (config(missing), config(missing))
