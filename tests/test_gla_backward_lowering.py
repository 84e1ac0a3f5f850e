"""The GLA backward as compiled: its lowering for TPU and Triton, its Pallas calls as the
grid model reads them, its cost model (cross-checked with XLA), and the case ids.
Its numerics are tests/test_gla_backward.py.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ci_bench.contract.spec import Case
from kernels.gla import (
    SPEC,
    backward_bytes,
    backward_flops,
    backward_tpu,
    chunk_gla,
    forward_backward_bytes,
    forward_backward_flops,
)
from kernels.gla.cost import gla_backward_call_costs, gla_backward_flops, gla_flops
from kernels.gla.native import chunk_gla_native
from tests.harness.gla import inputs as _inputs


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
    s = backward_tpu.DIAG  # the TPU body's diagonal blocks
    # Its bfloat16 0/1 matrices, read once: query, key, span, place, key_t (C·s × C or
    # C × C·s) and cum, ref, cum_t (C × C).
    masks = 2 * (5 * C * s * C + 3 * C * C)
    costs = gla_backward_call_costs(
        B, 256, H, K, V, 2, C, s, has_h0=True, pair_exps=1, mask_bytes=masks
    )
    seq, state = C * K * 2, V * K * 4  # one chunk block (bf16), one state block (f32)
    expected = {
        # k, v, gk blocks and h0 in; the state entering each chunk out; state scratch.
        "chunk_gla_states": 2 * (3 * seq + 2 * state) + state,
        # q, k, v, gk, do, the masks and the chunk's state in; dq, dk, dv, dgk and dh0 out;
        # dS scratch.
        "chunk_gla_bwd": 2 * (9 * seq + 2 * state + masks) + state,
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
    assert SPEC.version == "0.7.0"
