"""The GLA backward: ``jax.grad`` through ``chunk_gla`` (its custom_vjp runs the Pallas kernels
of ``kernels.gla.backward``) against autodiff of the float32 recurrence
(``kernels/gla/reference.py``) and of an independent float64 recurrence written here.

Tolerances are the SPEC's ``GRAD_TOLERANCES`` (derived in ``kernels/gla/__init__.py``):
float32 atol 2e-4 + rtol 1e-4 (observed here: <= 8e-5 against float64, the float32
reference itself <= 4e-5 from it); bfloat16 atol 2^-1 + rtol 2^-6 (observed: <= 0.33 on dgk
of magnitude ~100, mostly the bf16 rounding of the returned gradients). On CPU the kernels run
in Pallas interpret mode; both grid variants are exercised.
"""

from __future__ import annotations

import itertools
import json
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from ci_bench.contract.spec import Case
from kernels.gla import (
    GRAD_TOLERANCES,
    SPEC,
    backward_bytes,
    backward_chunk,
    backward_flops,
    chunk_gla,
    chunk_gla_bwd,
    forward_backward_bytes,
    forward_backward_flops,
    recurrent_gla,
)
from kernels.gla.cost import gla_backward_call_costs, gla_backward_flops, gla_flops
from kernels.gla.native import chunk_gla_native
from tests.conftest import run_cli, write_project

F32_TOL, BF16_TOL = GRAD_TOLERANCES["float32"], GRAD_TOLERANCES["bfloat16"]
NAMES = ("q", "k", "v", "gk", "h0")


def _inputs(B, T, H, K, V, *, seed=0, dtype=jnp.float32, gate=None):
    """q, k, v, gk in ``dtype`` (FLA-style gates unless ``gate``); float32 h0, do, dht."""
    keys = jax.random.split(jax.random.key(seed), 7)
    q = jax.random.normal(keys[0], (B, T, H, K))
    k = jax.random.normal(keys[1], (B, T, H, K))
    v = jax.random.normal(keys[2], (B, T, H, V))
    shape = (B, T, H, K)
    gk = (
        jax.nn.log_sigmoid(jax.random.normal(keys[3], shape)) / 16
        if gate is None
        else gate(keys[3], shape)
    )
    h0 = jax.random.normal(keys[4], (B, H, K, V))
    do = jax.random.normal(keys[5], (B, T, H, V)).astype(dtype)
    dht = jax.random.normal(keys[6], (B, H, K, V))
    return tuple(x.astype(dtype) for x in (q, k, v, gk)), h0, do, dht


def _recurrence64(q, k, v, gk, h0, scale):
    """S_t = diag(exp(gk_t)) S_{t-1} + k_tᵀ v_t, o_t = scale · q_t S_t, in float64."""

    def step(S, x):
        q_t, k_t, v_t, g_t = x
        S = jnp.exp(g_t)[..., None] * S + jnp.einsum("bhk,bhv->bhkv", k_t, v_t)
        return S, scale * jnp.einsum("bhk,bhkv->bhv", q_t, S)

    S, o = lax.scan(step, h0, [jnp.moveaxis(x, 1, 0) for x in (q, k, v, gk)])
    return jnp.moveaxis(o, 0, 1), S


def _grads64(inputs, h0, do, dht):
    """Gradients w.r.t. (q, k, v, gk, h0) of the float64 recurrence, as float64 numpy."""
    as64 = lambda x: np.asarray(jnp.asarray(x).astype(jnp.float32), np.float64)  # noqa: E731
    B, _, H, K = inputs[0].shape
    V = inputs[2].shape[-1]
    with jax.enable_x64(True):
        xs = [jnp.asarray(as64(x)) for x in inputs]
        h = jnp.asarray(as64(h0)) if h0 is not None else jnp.zeros((B, H, K, V), jnp.float64)
        _, vjp = jax.vjp(lambda *a: _recurrence64(*a, K**-0.5), *xs, h)
        dS = jnp.asarray(as64(dht)) if dht is not None else jnp.zeros((B, H, K, V), jnp.float64)
        return [np.asarray(g) for g in vjp((jnp.asarray(as64(do)), dS))]


def _vjp(fn, inputs, h0, do, dht):
    """Gradients of fn(q, k, v, gk, initial_state=h0, output_final_state=dht is not None)."""
    final = dht is not None

    def f(q, k, v, gk, h):
        return fn(q, k, v, gk, initial_state=h, output_final_state=final)

    _, vjp = jax.vjp(f, *inputs, h0)
    return vjp((do, dht) if final else do)


def _within(grad, ref, tol) -> tuple[bool, float]:
    """The correctness rule of the benchmark: |grad - ref| <= atol + rtol·|ref| everywhere."""
    grad, ref = np.asarray(grad, np.float64), np.asarray(ref, np.float64)
    err = np.abs(grad - ref)
    return bool(
        np.all(np.isfinite(grad)) and np.all(err <= tol.atol + tol.rtol * np.abs(ref))
    ), float(err.max())


def _assert_grads(grads, refs, tol, names=NAMES):
    for name, g, r in zip(names, grads, refs, strict=False):
        if g is None:  # no initial state: its absence is asserted by the caller
            continue
        g = np.asarray(jnp.asarray(g).astype(jnp.float32))
        assert g.shape == np.shape(r), name
        ok, err = _within(g, np.asarray(r, np.float64), tol)
        assert ok, f"d{name}: max |error| {err:.3g} beyond atol={tol.atol} rtol={tol.rtol}"


# (B, T, H, K, V): T not a multiple of 64 everywhere, several heads, K != V both ways.
GRAD_CASES = [
    pytest.param((2, 200, 2, 64, 64), "gpu", True, True, id="B2-T200-H2-K64-V64-h0-ht"),
    pytest.param((1, 150, 3, 64, 128), "tpu", True, False, id="B1-T150-H3-K64-V128-h0"),
    pytest.param((2, 100, 2, 128, 64), "gpu", False, True, id="B2-T100-H2-K128-V64-ht"),
]


@pytest.mark.parametrize(("shape", "backend", "with_h0", "with_ht"), GRAD_CASES)
def test_grads_match_float64_and_float32_recurrences(shape, backend, with_h0, with_ht):
    inputs, h0, do, dht = _inputs(*shape, seed=1)
    h0, dht = (h0 if with_h0 else None), (dht if with_ht else None)
    grads = _vjp(lambda *a, **kw: chunk_gla(*a, **kw, backend=backend), inputs, h0, do, dht)
    assert (grads[4] is None) == (h0 is None)
    _assert_grads(grads, _grads64(inputs, h0, do, dht), F32_TOL)
    _assert_grads(grads, _vjp(recurrent_gla, inputs, h0, do, dht), F32_TOL)


@pytest.mark.parametrize("backend", ["tpu", "gpu"])
def test_bfloat16_grads_within_spec_tolerance(backend):
    case = Case("gla", {"B": 2, "T": 200, "H": 2, "K": 128, "V": 128}, "bfloat16")
    inputs = SPEC.make_inputs(case, jax.random.key(6))
    do = jax.random.normal(jax.random.key(7), inputs[2].shape).astype(jnp.bfloat16)
    _, vjp = jax.vjp(lambda *a: chunk_gla(*a, backend=backend), *inputs)
    grads = vjp(do)
    assert all(g.dtype == jnp.bfloat16 for g in grads)
    _assert_grads(grads, _grads64(inputs, None, do, None), BF16_TOL)
    _, ref_vjp = jax.vjp(recurrent_gla, *inputs)
    refs = ref_vjp(do.astype(jnp.float32))
    _assert_grads(grads, refs, BF16_TOL)
    # The bf16 path is not secretly float32 end to end: it shows bf16-sized error.
    worst = max(
        float(jnp.max(jnp.abs(g.astype(jnp.float32) - r))) for g, r in zip(grads, refs, strict=True)
    )
    assert worst > 1e-3


def _strong_and_weak(key, shape):
    """Half the key channels decay by 5-20 nats per step, the other half barely at all."""
    k1, k2 = jax.random.split(key)
    strong = jax.random.uniform(k1, shape, minval=-20.0, maxval=-5.0)
    weak = jax.random.uniform(k2, shape, minval=-0.05, maxval=0.0)
    return jnp.where(jnp.arange(shape[-1]) % 2 == 0, strong, weak)


@pytest.mark.parametrize("backend", ["tpu", "gpu"])
def test_strong_decay_grads_are_finite_and_correct(backend):
    # Cumulative decay over a chunk reaches ~-800 nats: any exp(-b) factor would overflow.
    inputs, h0, do, dht = _inputs(1, 130, 2, 64, 64, seed=3, gate=_strong_and_weak)
    grads = _vjp(lambda *a, **kw: chunk_gla(*a, **kw, backend=backend), inputs, h0, do, dht)
    _assert_grads(grads, _grads64(inputs, h0, do, dht), F32_TOL)


@pytest.mark.parametrize("chunk_size", [32, 128])
def test_other_chunk_sizes(chunk_size):
    inputs, h0, do, _ = _inputs(1, 200, 1, 64, 64, seed=5)
    grads = _vjp(lambda *a, **kw: chunk_gla(*a, **kw, chunk_size=chunk_size), inputs, h0, do, None)
    _assert_grads(grads, _grads64(inputs, h0, do, None), F32_TOL)


def test_state_gradient_flows_across_split_calls():
    """Two calls chained through the final state differentiate like the unsplit call."""
    inputs, h0, do, _ = _inputs(1, 160, 2, 64, 64, seed=2)

    def split(q, k, v, gk, h):
        first, state = chunk_gla(
            q[:, :70], k[:, :70], v[:, :70], gk[:, :70], initial_state=h, output_final_state=True
        )
        second = chunk_gla(q[:, 70:], k[:, 70:], v[:, 70:], gk[:, 70:], initial_state=state)
        return jnp.concatenate([first, second], axis=1)

    _, vjp = jax.vjp(split, *inputs, h0)
    _assert_grads(vjp(do), _grads64(inputs, h0, do, None), F32_TOL)


def test_backward_callable_and_bad_arguments():
    inputs, h0, do, dht = _inputs(1, 80, 1, 64, 64, seed=4)
    direct = chunk_gla_bwd(*inputs, do, initial_state=h0, dht=dht)
    via_vjp = _vjp(chunk_gla, inputs, h0, do, dht)
    for a, b in zip(direct, via_vjp, strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="multiple of 16"):
        chunk_gla_bwd(*inputs, do, chunk_size=40)
    with pytest.raises(ValueError, match="backend"):
        chunk_gla_bwd(*inputs, do, backend="cpu")


@pytest.fixture
def dropped_state_carry(monkeypatch):
    """dgk without the entering state's share of the later chunks' contribution (a bug)."""
    jax.clear_caches()  # traces of chunk_gla made before would ignore the patch
    monkeypatch.setattr(backward_chunk, "state_carry", lambda st, dst, e_last: 0.0 * e_last)
    yield
    monkeypatch.undo()
    jax.clear_caches()  # and traces made with it must not leak into other tests


def test_dropped_dgk_term_fails_the_gradient_check(dropped_state_carry):
    inputs, h0, do, _ = _inputs(1, 176, 2, 64, 64, seed=8)
    grads = _vjp(chunk_gla, inputs, h0, do, None)
    refs = _vjp(recurrent_gla, inputs, h0, do, None)
    _assert_grads(grads[:3], refs[:3], F32_TOL)  # dq, dk, dv are untouched by the bug
    ok, err = _within(grads[3], refs[3], F32_TOL)
    assert not ok
    assert err > 1.0  # O(the gradients' rms): any sane tolerance catches it


GRAD_SPEC = """
import dataclasses
from unittest import mock

import jax

from ci_bench.spec import MatrixProfile
from kernels.gla import SPEC as GLA
from kernels.gla import backward_chunk

DROP_STATE_CARRY = {drop}
POINT = {{"B": 1, "T": 136, "H": 2, "K": 64, "V": 64}}


if DROP_STATE_CARRY:
    # The bug, in this process only: the backward kernels are traced after the forward
    # returned, so the patch must hold while jax.vjp traces them.
    mock.patch.object(backward_chunk, "state_carry", lambda st, dst, e: 0.0 * e).start()

# GLA's own SPEC, its backward mode at one shape with a partial chunk.
SPEC = dataclasses.replace(
    GLA,
    name="{name}",
    matrix={{"smoke": MatrixProfile([POINT], ["float32"], modes=("backward",))}},
)
"""


def test_dropped_dgk_term_is_an_error_in_the_benchmark(tmp_path: Path):
    """GLA's backward mode measured by `ci-bench run`: correct gradients are `ok`, a dropped
    dgk term an `error` (exit 1) naming the gradient, never a speedup."""
    cases = {}
    # The dropped run measures nothing fine: exit 3, every case (its one) an error.
    for name, drop, code in (("gla_grads", False, 0), ("gla_grads_dropped", True, 3)):
        folder = tmp_path / name  # one process each: the dropped term patches its module
        folder.mkdir()
        (folder / f"{name}.py").write_text(textwrap.dedent(GRAD_SPEC.format(name=name, drop=drop)))
        write_project(folder, [name])
        out = folder / "r.json"
        done = run_cli("run", "--repeats", "2", "--warmup", "0", "-o", str(out), cwd=folder)
        assert done.returncode == code, done.stderr[-2000:]
        cases |= {c["id"]: c for c in json.loads(out.read_text())["cases"]}
    good = cases["gla_grads/B1-T136-H2-K64-V64/float32/backward"]
    bad = cases["gla_grads_dropped/B1-T136-H2-K64-V64/float32/backward"]
    assert good["status"] == "ok", good.get("error")
    assert bad["status"] == "error"
    assert bad["error"].startswith("incorrect gradient for gk:"), bad["error"]
    assert bad["speedup"] is None


def _backward_export(case: Case, platform: str = "tpu"):
    shapes = jax.eval_shape(lambda key: SPEC.make_inputs(case, key), jax.random.key(0))
    do = jax.ShapeDtypeStruct(shapes[2].shape, shapes[2].dtype)

    def backward(q, k, v, gk, do):
        _, vjp = jax.vjp(chunk_gla, q, k, v, gk)
        return vjp(do)

    return jax.export.export(jax.jit(backward), platforms=[platform])(*shapes, do)


def test_backward_lowers_for_tpu_on_every_smoke_and_ci_case():
    """jax.vjp of the SPEC's kernel applied to a cotangent, exported for TPU on this CPU: the
    real Pallas -> Mosaic lowering of the two backward calls, for every case. The forward's
    call is not in it: the residuals are the inputs, so nothing of the forward is needed."""
    cases = [c for c in SPEC.cases("smoke") + SPEC.cases("ci") if c.mode == "backward"]
    assert len(cases) == 16  # 8 points x 2 dtypes, each also timed forward
    for case in cases:
        text = _backward_export(case).mlir_module()
        assert text.count("tpu_custom_call") == 2, case.id
        assert "chunk_gla_states" in text, case.id
        assert "chunk_gla_bwd" in text, case.id
        assert "chunk_gla_fwd" not in text, case.id


def test_backward_lowers_to_triton():
    """The GPU variant's non-interpret lowering to Triton IR (the GPU compiler is not run)."""
    q = jax.ShapeDtypeStruct((2, 200, 2, 64), jnp.bfloat16)
    h0 = jax.ShapeDtypeStruct((2, 2, 64, 64), jnp.float32)

    def loss(q, k, v, gk, h):
        o, ht = chunk_gla(
            q, k, v, gk, initial_state=h, output_final_state=True, interpret=False, backend="gpu"
        )
        return jnp.sum(o.astype(jnp.float32) ** 2) + jnp.sum(ht**2)  # needs the forward too

    fn = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3, 4)))
    text = fn.trace(q, q, q, q, h0).lower(lowering_platforms=("cuda",)).as_text()
    assert text.count("__gpu$xla.gpu.triton") == 3
    for name in ("chunk_gla_fwd", "chunk_gla_states", "chunk_gla_bwd"):
        assert name in text, name


def _pallas_calls(jaxpr) -> list:
    """Every pallas_call equation in a jaxpr, inside jit, custom_vjp, cond and loops."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pallas_call":
            found.append(eqn)
            continue
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else [param]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    found.extend(_pallas_calls(inner))
    return found


def _grid_model(eqn) -> dict[str, int]:
    """HBM bytes, grid steps and double-buffered VMEM of one pallas_call, by the TPU
    pipeline's rule: a block is copied when its block index differs from the previous step's
    (row-major grid order, last dimension fastest)."""
    gm = eqn.params["grid_mapping"]
    steps = list(np.ndindex(*gm.grid))
    hbm = vmem = 0
    for bm in gm.block_mappings:
        block_bytes = int(np.prod(bm.ref_aval.shape)) * bm.array_aval.dtype.itemsize
        indices = [
            tuple(int(i) for i in jax.core.eval_jaxpr(bm.index_map_jaxpr.jaxpr, [], *s))
            for s in steps
        ]
        copies = 1 + sum(a != b for a, b in itertools.pairwise(indices))
        hbm += copies * block_bytes
        vmem += 2 * block_bytes
    vmem += sum(int(np.prod(a.shape)) * a.dtype.itemsize for a in gm.scratch_avals)
    return {"hbm_bytes": hbm, "grid_steps": len(steps), "vmem_bytes": vmem}


def test_backward_calls_as_a_grid_model_reads_them():
    """What `ci-bench analyze` reads from the traced grid: the backward's two pallas_calls,
    their steps, HBM bytes (equal to each call's cost estimate) and VMEM, hand-computed."""
    B, T, H, K, V, C = 2, 200, 2, 128, 128, 64  # 4 chunks, the last one partial
    x = jax.ShapeDtypeStruct((B, T, H, K), jnp.bfloat16)
    h0 = jax.ShapeDtypeStruct((B, H, K, V), jnp.float32)

    def loss(q, k, v, gk, h):
        o = chunk_gla(q, k, v, gk, initial_state=h, interpret=False, backend="tpu")
        return jnp.sum(o.astype(jnp.float32))

    jaxpr = jax.make_jaxpr(jax.grad(loss, argnums=(0, 1, 2, 3, 4)))(x, x, x, x, h0)
    calls = {eqn.params["name"]: eqn for eqn in _pallas_calls(jaxpr.jaxpr)}
    assert set(calls) == {"chunk_gla_fwd", "chunk_gla_states", "chunk_gla_bwd"}
    costs = gla_backward_call_costs(B, 256, H, K, V, 2, C, has_h0=True)
    seq, state = C * K * 2, V * K * 4  # one chunk block (bf16), one state block (f32)
    expected = {
        # k, v, gk blocks and h0 in; the state entering each chunk out; state scratch.
        "chunk_gla_states": 2 * (3 * seq + 2 * state) + state,
        # q, k, v, gk, do and the chunk's state in; dq, dk, dv, dgk and dh0 out; dS scratch.
        "chunk_gla_bwd": 2 * (9 * seq + 2 * state) + state,
    }
    for name, vmem in expected.items():
        model = _grid_model(calls[name])
        assert model["grid_steps"] == B * H * 4
        assert model["hbm_bytes"] == calls[name].params["cost_estimate"].bytes_accessed
        assert model["hbm_bytes"] == costs[name.removeprefix("chunk_gla_")]["bytes_accessed"]
        assert model["vmem_bytes"] == vmem


def test_backward_cost_model():
    # 2·B·H·T·(5·K·V + C·(3·K + 2·V)), linear in B, T and H.
    assert gla_backward_flops(2, 1024, 4, 64, 128) == 2 * 2 * 1024 * 4 * (
        5 * 64 * 128 + 64 * (3 * 64 + 2 * 128)
    )
    base = gla_backward_flops(1, 512, 2, 128, 128)
    assert (
        gla_backward_flops(2, 512, 2, 128, 128)
        == gla_backward_flops(1, 1024, 2, 128, 128)
        == 2 * base
    )
    # 2.5x the forward for K = V = C, as for attention.
    assert gla_backward_flops(1, 512, 1, 64, 64) == 2.5 * gla_flops(1, 512, 1, 64, 64)
    # The two calls' estimates add up to the model.
    costs = gla_backward_call_costs(2, 512, 4, 64, 128, 2)
    assert costs["states"]["flops"] + costs["bwd"]["flops"] == gla_backward_flops(
        2, 512, 4, 64, 128
    )
    # bytes: q, k, gk, v, do read and dq, dk, dgk, dv written, at the input itemsize.
    case = Case("gla", {"B": 1, "T": 256, "H": 2, "K": 64, "V": 64}, "bfloat16")
    assert backward_bytes(case) == 2 * 256 * 2 * (6 * 64 + 3 * 64)
    # Both in one call: q, k, gk, v and do read once, o and the gradients written.
    assert forward_backward_bytes(case) == 2 * 256 * 2 * (6 * 64 + 4 * 64)
    assert forward_backward_flops(case) == SPEC.flops(case) + backward_flops(case)


@pytest.mark.parametrize("shape", [(1, 64, 1, 64, 64), (2, 64, 2, 64, 128), (1, 64, 2, 128, 64)])
def test_backward_flops_cross_checked_with_xla(shape):
    """XLA's count for the native baseline's VJP (one chunk, so its scan body runs once): the
    model minus what the recomputation adds (the states, the scores A) matches it within
    15 %, and the model itself is within the harness's 2x cost-model factor."""
    B, T, H, K, V = shape
    inputs, _, do, _ = _inputs(*shape)
    _, vjp = jax.vjp(chunk_gla_native, *inputs)
    xla = jax.jit(lambda f, do: f(do)).lower(vjp, do).compile().cost_analysis()["flops"]
    model = gla_backward_flops(*shape)
    recompute = 2 * B * H * T * (K * V + 64 * K)
    assert 0.85 < (model - recompute) / xla < 1.15
    assert 1 < model / xla < 2


def test_forward_case_ids_unchanged_by_the_version_bump():
    """Baselines are keyed by case id: the backward must not rename a forward case (a
    forward case keeps the id it had before modes; a backward case adds ``/backward``)."""
    cases = SPEC.cases("smoke") + SPEC.cases("ci")
    points = ["B1-T256-H2-K64-V64", "B1-T200-H2-K64-V64", "B2-T128-H1-K128-V128"]
    points += ["B1-T1024-H4-K64-V64", "B2-T512-H4-K128-V128", "B4-T2048-H4-K64-V64"]
    points += ["B1-T4096-H2-K128-V128", "B4-T1024-H8-K128-V128"]
    forward = sorted(f"gla/{p}/{d}" for p in points for d in ("float32", "bfloat16"))
    assert sorted(c.id for c in cases if c.mode == "forward") == forward
    assert sorted(c.id for c in cases if c.mode == "backward") == [f"{i}/backward" for i in forward]
    assert SPEC.version == "0.3.0"
