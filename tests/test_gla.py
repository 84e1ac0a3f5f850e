"""kernels.gla: the Pallas kernel and the native baseline against the float32 recurrence.

On CPU the kernel runs in Pallas interpret mode; both grid variants ("tpu": chunk axis in the
grid with a VMEM state, "gpu": in-kernel loop over chunks) are exercised.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ci_bench.contract.spec import Case, Tolerance
from kernels.gla import SPEC, chunk_gla, chunk_gla_native, recurrent_gla

BACKENDS = ("tpu", "gpu")
F32_TOL = SPEC.tolerances["float32"]


def _inputs(B, T, H, K, V, *, seed=0, dtype=jnp.float32, gate=None):
    """Random q, k, v, gk (FLA-style gates log_sigmoid(x)/16 unless ``gate`` makes them)."""
    kq, kk, kv, kg, kh = jax.random.split(jax.random.key(seed), 5)
    q = jax.random.normal(kq, (B, T, H, K))
    k = jax.random.normal(kk, (B, T, H, K))
    v = jax.random.normal(kv, (B, T, H, V))
    if gate is None:
        gk = jax.nn.log_sigmoid(jax.random.normal(kg, (B, T, H, K))) / 16
    else:
        gk = gate(kg, (B, T, H, K))
    h0 = jax.random.normal(kh, (B, H, K, V))
    return tuple(x.astype(dtype) for x in (q, k, v, gk)), h0


def _assert_close(out, ref, tol=F32_TOL):
    out, ref = np.asarray(out, np.float32), np.asarray(ref, np.float32)
    assert out.shape == ref.shape
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out, ref, atol=tol.atol, rtol=tol.rtol)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "shape",
    [(2, 200, 2, 64, 64), (1, 150, 1, 128, 128)],
    ids=["T-not-multiple", "K128"],
)
def test_kernel_matches_recurrence(backend, shape):
    (q, k, v, gk), _ = _inputs(*shape)
    _assert_close(chunk_gla(q, k, v, gk, backend=backend), recurrent_gla(q, k, v, gk))


@pytest.mark.parametrize(("backend", "with_h0"), [("tpu", True), ("gpu", True), ("gpu", False)])
def test_initial_and_final_state(backend, with_h0):
    (q, k, v, gk), h0 = _inputs(2, 100, 2, 64, 64, seed=1)
    h0 = h0 if with_h0 else None
    o, ht = chunk_gla(q, k, v, gk, initial_state=h0, output_final_state=True, backend=backend)
    ref_o, ref_ht = recurrent_gla(q, k, v, gk, initial_state=h0, output_final_state=True)
    assert ht.shape == (2, 2, 64, 64)
    assert ht.dtype == jnp.float32
    _assert_close(o, ref_o)
    _assert_close(ht, ref_ht)


def test_state_carries_across_calls():
    """Splitting a sequence and passing the final state on gives the unsplit result."""
    (q, k, v, gk), _ = _inputs(1, 192, 2, 64, 64, seed=2)
    whole = chunk_gla(q, k, v, gk)
    first, state = chunk_gla(q[:, :70], k[:, :70], v[:, :70], gk[:, :70], output_final_state=True)
    second = chunk_gla(q[:, 70:], k[:, 70:], v[:, 70:], gk[:, 70:], initial_state=state)
    _assert_close(jnp.concatenate([first, second], axis=1), whole)


def _strong_and_weak(key, shape):
    """Half the key channels decay by 5-20 nats per step, the other half barely at all."""
    k1, k2 = jax.random.split(key)
    strong = jax.random.uniform(k1, shape, minval=-20.0, maxval=-5.0)
    weak = jax.random.uniform(k2, shape, minval=-0.05, maxval=0.0)
    return jnp.where(jnp.arange(shape[-1]) % 2 == 0, strong, weak)


@pytest.mark.parametrize("backend", BACKENDS)
def test_strong_decay_is_finite_and_correct(backend):
    # Cumulative decay over a 64-step chunk reaches ~-800 nats: exp(-b) would overflow.
    (q, k, v, gk), h0 = _inputs(1, 130, 2, 64, 64, seed=3, gate=_strong_and_weak)
    o, ht = chunk_gla(q, k, v, gk, initial_state=h0, output_final_state=True, backend=backend)
    ref_o, ref_ht = recurrent_gla(q, k, v, gk, initial_state=h0, output_final_state=True)
    _assert_close(o, ref_o)
    _assert_close(ht, ref_ht)


def test_no_decay_is_plain_linear_attention():
    (q, k, v, _), _ = _inputs(1, 96, 1, 64, 64, seed=4)
    gk = jnp.zeros_like(q)
    scale = 0.5
    o = chunk_gla(q, k, v, gk, scale=scale)
    causal = jnp.tril(jnp.ones((96, 96)))
    scores = jnp.einsum("bthk,bshk->bhts", q, k, precision="highest") * causal
    expected = scale * jnp.einsum("bhts,bshv->bthv", scores, v, precision="highest")
    _assert_close(o, expected, Tolerance(atol=1e-3, rtol=1e-4))


@pytest.mark.parametrize("chunk_size", [32, 128])
def test_other_chunk_sizes(chunk_size):
    (q, k, v, gk), h0 = _inputs(1, 200, 1, 64, 64, seed=5)
    o = chunk_gla(q, k, v, gk, initial_state=h0, chunk_size=chunk_size)
    _assert_close(o, recurrent_gla(q, k, v, gk, initial_state=h0))


def test_bad_arguments_raise():
    (q, k, v, gk), _ = _inputs(1, 64, 1, 64, 64)
    with pytest.raises(ValueError, match="multiple of 16"):
        chunk_gla(q, k, v, gk, chunk_size=40)
    with pytest.raises(ValueError, match="shape mismatch"):
        chunk_gla(q, k[:, :32], v, gk)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bfloat16_within_spec_tolerance(backend):
    """bf16 inputs, fp32 accumulation; the tolerance is derived in kernels/gla/__init__.py."""
    case = Case("gla", {"B": 2, "T": 200, "H": 2, "K": 128, "V": 128}, "bfloat16")
    q, k, v, gk = SPEC.make_inputs(case, jax.random.key(6))
    assert q.dtype == jnp.bfloat16
    o = chunk_gla(q, k, v, gk, backend=backend)
    assert o.dtype == jnp.bfloat16
    ref = recurrent_gla(q, k, v, gk)
    _assert_close(o, ref, SPEC.tolerances["bfloat16"])
    # The bf16 path is not secretly float32 end to end: it shows bf16-sized error.
    assert float(jnp.max(jnp.abs(o.astype(jnp.float32) - ref))) > 1e-3


def test_native_matches_recurrence():
    for seed, gate in [(7, None), (8, _strong_and_weak)]:
        (q, k, v, gk), h0 = _inputs(2, 150, 2, 64, 64, seed=seed, gate=gate)
        o, ht = chunk_gla_native(q, k, v, gk, initial_state=h0, output_final_state=True)
        ref_o, ref_ht = recurrent_gla(q, k, v, gk, initial_state=h0, output_final_state=True)
        _assert_close(o, ref_o)
        _assert_close(ht, ref_ht)


def test_smoke_profile_correct_like_the_service():
    """What `ci-bench run --kernel gla --profile smoke` checks, case by case."""
    for case in SPEC.cases("smoke"):
        inputs = SPEC.make_inputs(case, jax.random.key(0))
        ref = jax.jit(SPEC.reference)(*inputs)
        tol = SPEC.tolerances[case.dtype]
        for impl in (SPEC.pallas, SPEC.native):
            out = jax.jit(impl)(*inputs)
            assert out.shape == ref.shape, case.id
            _assert_close(out, ref, tol)


@pytest.mark.parametrize(("C", "s"), [(16, 8), (64, 8), (64, 16)])
def test_broadcast_pairs_are_the_rows_the_gathers_pick(C, s):
    """0.7.0 builds each pair's query row, key row and Σ g over (j, i] on the vector unit;
    they must be the rows 0.6.0's exact 0/1 gathers picked (the key's above the diagonal
    aside, which ``key`` zeroes in the score anyway)."""
    from kernels.gla import forward_tpu

    q, k, g = jax.random.normal(jax.random.key(7), (3, C, 64))
    g = -jnp.abs(g) * 4  # strong decay: sums of a block's gates, not of the chunk's
    named = dict(zip(forward_tpu.MASK_NAMES, forward_tpu.masks(C, s), strict=True))
    causal = np.asarray(named["key"], np.float32).sum(axis=1, keepdims=True) > 0
    pairs = {}
    for layout in ("gather", "broadcast"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(forward_tpu, "PAIRS", layout)
            pairs[layout] = [np.asarray(x) for x in forward_tpu.pair_rows(q, k, g, named, s)]
    (q_g, k_g, span_g), (q_b, k_b, span_b) = pairs["gather"], pairs["broadcast"]
    np.testing.assert_array_equal(q_b, q_g)
    np.testing.assert_array_equal(np.where(causal, k_b, 0.0), k_g)
    # c_i - c_j rounds twice where the gather summed once: a few ulps of a block's sum
    ulps = 8 * np.finfo(np.float32).eps * s * float(jnp.max(jnp.abs(g)))
    np.testing.assert_allclose(np.where(causal, span_b, 0.0), span_g, rtol=0, atol=ulps)


def test_spec_contract():
    assert SPEC.name == "gla"
    assert SPEC.version == "0.7.0"
    assert set(SPEC.matrix) >= {"smoke", "ci", "full"}
    full_ids = {c.id for c in SPEC.cases("full")}
    assert "gla/B4-T2048-H16-K128-V128/bfloat16" in full_ids
    for profile in ("smoke", "ci", "full"):
        cases = SPEC.cases(profile)
        assert {c.dtype for c in cases} == {"float32", "bfloat16"}
        for c in cases:
            assert list(c.params) == ["B", "T", "H", "K", "V"]
            assert c["K"] == c["V"] in (64, 128)
    full = SPEC.cases("full")
    assert {c["B"] for c in full} == {1, 4, 16}
    assert {c["T"] for c in full} == {256, 1024, 2048, 4096}
    smoke = SPEC.cases("smoke")
    assert any(c["T"] % 64 for c in smoke), "smoke must cover T not a multiple of the chunk"
    assert SPEC.case_from_shape((4, 2048, 16, 128, 128), "bfloat16").id in full_ids


def test_cost_model():
    def case(B=2, T=1024, H=4, D=64, dtype="bfloat16"):
        return Case("gla", {"B": B, "T": T, "H": H, "K": D, "V": D}, dtype)

    base = SPEC.flops(case())
    assert isinstance(base, int)
    assert isinstance(SPEC.bytes_accessed(case()), int)
    # Linear in B, T and H; intra-chunk (2·C·(K+V)) plus inter-chunk (4·K·V) per token.
    assert SPEC.flops(case(B=4)) == SPEC.flops(case(T=2048)) == SPEC.flops(case(H=8)) == 2 * base
    assert base == 2 * 1024 * 4 * 2 * (2 * 64 * 64 + 64 * (64 + 64))
    # bytes: q, k, gk, v read and o written once, at the input itemsize.
    assert SPEC.bytes_accessed(case()) == 2 * 2 * 1024 * 4 * (3 * 64 + 2 * 64)
    assert SPEC.bytes_accessed(case(dtype="float32")) == 2 * SPEC.bytes_accessed(case())


@pytest.mark.parametrize(("backend", "platform"), [("tpu", "tpu"), ("gpu", "cuda")])
def test_lowers_to_mosaic_and_triton(backend, platform):
    """Non-interpret lowering to Mosaic / Triton IR works without the device (the device
    compilers themselves are not run here)."""
    q = jax.ShapeDtypeStruct((2, 200, 2, 64), jnp.bfloat16)
    h0 = jax.ShapeDtypeStruct((2, 2, 64, 64), jnp.float32)
    fn = functools.partial(chunk_gla, output_final_state=True, interpret=False, backend=backend)
    lowered = (
        jax.jit(lambda q, k, v, g, h: fn(q, k, v, g, initial_state=h))
        .trace(q, q, q, q, h0)
        .lower(lowering_platforms=(platform,))
    )
    text = lowered.as_text()
    assert ("tpu_custom_call" if backend == "tpu" else "triton") in text


@pytest.mark.accelerator  # skipped on CPU by the ci_bench pytest plugin
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_compiled_kernel_on_accelerator(dtype):
    """The compiled (non-interpret) kernel for the default device's variant."""
    case = Case("gla", {"B": 2, "T": 1000, "H": 4, "K": 128, "V": 128}, dtype)
    inputs = SPEC.make_inputs(case, jax.random.key(9))
    o, ht = chunk_gla(*inputs, output_final_state=True)
    ref_o, ref_ht = recurrent_gla(*inputs, output_final_state=True)
    _assert_close(o, ref_o, SPEC.tolerances[dtype])
    _assert_close(ht, ref_ht, SPEC.tolerances[dtype])
