"""The GLA backward: ``jax.grad`` through ``chunk_gla`` (its custom_vjp runs the Pallas kernels
of ``kernels.gla.backward``) against autodiff of the float32 recurrence
(``kernels/gla/reference.py``) and of an independent float64 recurrence written here.

Tolerances are the SPEC's ``GRAD_TOLERANCES`` (derived in ``kernels/gla/__init__.py``):
float32 atol 2e-4 + rtol 1e-4 (observed here: <= 8e-5 against float64, the float32
reference itself <= 4e-5 from it); bfloat16 atol 2^-1 + rtol 2^-6 (observed: <= 0.33 on dgk
of magnitude ~100, mostly the bf16 rounding of the returned gradients). On CPU the kernels run
in Pallas interpret mode; both grid variants are exercised.
The lowering and cost model of the backward: tests/test_gla_backward_lowering.py.
"""

from __future__ import annotations

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
    backward_chunk,
    chunk_gla,
    chunk_gla_bwd,
    recurrent_gla,
)
from tests.conftest import run_cli, write_project
from tests.harness.gla import inputs as _inputs

F32_TOL, BF16_TOL = GRAD_TOLERANCES["float32"], GRAD_TOLERANCES["bfloat16"]
NAMES = ("q", "k", "v", "gk", "h0")


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


@pytest.mark.parametrize(
    ("chunk_size", "backend"), [(32, "gpu"), (128, "gpu"), (16, "tpu"), (128, "tpu")]
)
def test_other_chunk_sizes(chunk_size, backend):
    # The TPU body at 16 (two 8-row diagonal blocks) and 128 (the size tuned for bfloat16)
    inputs, h0, do, _ = _inputs(1, 200, 1, 64, 64, seed=5)
    grads = _vjp(
        lambda *a, **kw: chunk_gla(*a, **kw, chunk_size=chunk_size, backend=backend),
        inputs, h0, do, None,
    )  # fmt: skip
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


@pytest.mark.parametrize("backend", ["tpu", "gpu"])
def test_dropped_dgk_term_fails_the_gradient_check(dropped_state_carry, backend):
    inputs, h0, do, _ = _inputs(1, 176, 2, 64, 64, seed=8)
    grads = _vjp(lambda *a, **kw: chunk_gla(*a, **kw, backend=backend), inputs, h0, do, None)
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
