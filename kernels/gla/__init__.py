"""Gated linear attention (GLA): chunked Pallas forward and backward, benchmarked by ci-bench.

``SPEC`` declares the inputs, the three implementations (Pallas kernel, pure-JAX chunked
baseline, float32 recurrence), the cost model (see ``kernels.gla.cost``), the tolerances and
the parameter matrix. ``SPEC`` measures the forward; the backward is ready to be declared as
a mode (see "Backward" below): ``chunk_gla`` is differentiable through its Pallas backward
(``chunk_gla_bwd``), the native baseline and the reference through autodiff.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp

from ci_bench.spec import (
    Case,
    KernelSpec,
    MatrixProfile,
    Tolerance,
    Tunables,
    points,
    tuned_config,
)
from kernels.gla.common import check_chunk_size
from kernels.gla.cost import (
    ITEMSIZE,
    gla_backward_bytes,
    gla_backward_flops,
    gla_bytes,
    gla_flops,
    gla_forward_backward_bytes,
    gla_forward_backward_flops,
)
from kernels.gla.kernel import chunk_gla, chunk_gla_bwd
from kernels.gla.native import chunk_gla_native
from kernels.gla.reference import recurrent_gla

__all__ = [
    "GRAD_TOLERANCES",
    "SPEC",
    "TUNABLES",
    "backward_bytes",
    "backward_flops",
    "chunk_gla",
    "chunk_gla_bwd",
    "chunk_gla_native",
    "forward_backward_bytes",
    "forward_backward_flops",
    "make_inputs",
    "recurrent_gla",
]

# FLA's GLA layer divides log-sigmoid gates by this "gate logit normalizer": per-step decay
# of ~0.05 nats, so a 64-token chunk decays by ~e^-3 and both the intra-chunk and the
# carried inter-chunk terms matter in the correctness check.
GATE_NORMALIZER = 16.0


def make_inputs(case: Case, key: jax.Array) -> tuple[jax.Array, ...]:
    """(q, k, v, gk) for one case, deterministic in ``key``; gk = log_sigmoid(x) / 16 <= 0."""
    B, T, H, K, V = (case[n] for n in ("B", "T", "H", "K", "V"))
    dtype = jnp.dtype(case.dtype)
    kq, kk, kv, kg = jax.random.split(key, 4)
    q = jax.random.normal(kq, (B, T, H, K), jnp.float32)
    k = jax.random.normal(kk, (B, T, H, K), jnp.float32)
    v = jax.random.normal(kv, (B, T, H, V), jnp.float32)
    gk = jax.nn.log_sigmoid(jax.random.normal(kg, (B, T, H, K), jnp.float32)) / GATE_NORMALIZER
    return tuple(x.astype(dtype) for x in (q, k, v, gk))


# 0.5.0: the TPU forward's diagonal blocks are 8 rows, its off-diagonal products one [8, C]
# per sub-chunk (kernels.gla.forward_tpu); 0.4.0 measured 1.3-1.5x slower on a TPU v5e.
# 0.6.0: the TPU backward's chunk body has no loops either (kernels.gla.backward_tpu: pairs
# as rows, as the forward's); 0.5.0's per-position loop ran it at 10x the forward on a v5e.
# 0.7.0: the TPU forward's pair rows are repeated and tiled on the vector unit, their decay
# from block-local cumulative gates (forward_tpu.PAIRS), no longer gathered by 0/1 matmuls:
# on a v5e float32 B4-T1024-H8-K128 1238 -> 777 µs, bfloat16 418 -> 329 µs.
VERSION = "0.7.0"
# Where `ci-bench tune --write` keeps the tuned configs (this repository's baselines).
BASELINES = Path(__file__).resolve().parents[2] / "baselines"


def _pallas(q: jax.Array, k: jax.Array, v: jax.Array, gk: jax.Array) -> jax.Array:
    """The subject: the tuned chunk size of this case on this process's TPU chip (the
    ``.tuned.<chip>.json`` beside the baselines), else ``chunk_gla``'s default of 64."""
    B, T, H, K = q.shape
    params = {"B": B, "T": T, "H": H, "K": K, "V": v.shape[-1]}
    config = tuned_config(
        "gla", VERSION, params, q.dtype.name, directory=BASELINES,
        default=TUNABLES.default, tunables=TUNABLES,
    )  # fmt: skip
    return chunk_gla(q, k, v, gk, chunk_size=config["chunk_size"])


def chunk_config(chunk_size: int) -> int:
    """The chunk size, validated as ``chunk_gla`` does (a positive multiple of 16)."""
    check_chunk_size(chunk_size)
    return chunk_size


def with_chunk(chunk_size: int) -> Callable[..., jax.Array]:
    """The subject at another chunk size: how the kernel takes a config."""

    def pallas(q: jax.Array, k: jax.Array, v: jax.Array, gk: jax.Array) -> jax.Array:
        return chunk_gla(q, k, v, gk, chunk_size=chunk_size)

    return pallas


# The chunk length C trades the intra-chunk work (C² per chunk, on the MXU) against the grid
# steps and state updates (T / C of them); 64 is FLA's default. Sequences are padded to C.
TUNABLES = Tunables(
    space={"chunk_size": (16, 32, 64, 128, 256)},
    default={"chunk_size": 64},
    config=chunk_config,
    build=with_chunk,
)


def _native(q: jax.Array, k: jax.Array, v: jax.Array, gk: jax.Array) -> jax.Array:
    return chunk_gla_native(q, k, v, gk)


def _reference(q: jax.Array, k: jax.Array, v: jax.Array, gk: jax.Array) -> jax.Array:
    return recurrent_gla(q, k, v, gk)


def _dims(case: Case) -> tuple[int, int, int, int, int]:
    return case["B"], case["T"], case["H"], case["K"], case["V"]


def flops(case: Case) -> int:
    """2·B·H·T·(2·K·V + 64·(K + V)): intra- and inter-chunk matmuls (kernels.gla.cost)."""
    return gla_flops(*_dims(case))


def bytes_accessed(case: Case) -> int:
    """itemsize·B·T·H·(3·K + 2·V): q, k, gk, v read and o written once (kernels.gla.cost)."""
    return gla_bytes(*_dims(case), ITEMSIZE[case.dtype])


# Tolerances for |pallas - reference| <= atol + rtol·|reference|, the reference being the
# float32 recurrence on the same (already rounded) inputs, so input rounding cancels out.
# float32: float32 matmuls (HIGHEST / IEEE) and exps; observed max error ~1e-5 on outputs of
# magnitude up to ~20 (rms ~3); 1e-4 leaves room for other exp and matmul implementations.
# bfloat16: two error sources, accumulation is float32 throughout.
#  * o is returned in bf16: rounding is at most half an ulp, <= 2^-8·|o| (rtol = 2^-6 = 4x).
#  * matmul operands (gated q and k, the score block, the state) are rounded to bf16
#    (<= 2^-9 relative each) as any bf16 MXU / tensor-core kernel does; summed over K·(C + K)
#    terms these errors add like a random walk, so they scale with the rms of the outputs
#    (~3 for these inputs), not with each |o|. Over ~10^6 outputs per case their maximum,
#    together with the output rounding, reached 0.093 (B4-T2048-H16-K128); atol = 2^-3 = 0.125
#    keeps the worst observed case at ~40% of the tolerance while a real bug (a wrong decay or
#    a dropped chunk) is O(1).
TOLERANCES = {
    "float32": Tolerance(atol=1e-4, rtol=1e-4),
    "bfloat16": Tolerance(atol=2**-3, rtol=2**-6),
}


# --- Backward -------------------------------------------------------------------------------
# jax.vjp of SPEC.pallas runs the Pallas backward (chunk_gla's custom_vjp); of SPEC.native and
# SPEC.reference, autodiff. The cotangent of o has o's dtype; the gradients come in the
# inputs' dtypes.


def backward_flops(case: Case) -> int:
    """2·B·H·T·(5·K·V + 64·(3·K + 2·V)): the chunked backward's matmuls (kernels.gla.cost)."""
    return gla_backward_flops(*_dims(case))


def backward_bytes(case: Case) -> int:
    """itemsize·B·T·H·(6·K + 3·V): q, k, gk, v, do read, dq, dk, dgk, dv written once."""
    return gla_backward_bytes(*_dims(case), ITEMSIZE[case.dtype])


def forward_backward_flops(case: Case) -> int:
    """flops(case) + backward_flops(case): a training step's value and gradients."""
    return gla_forward_backward_flops(*_dims(case))


def forward_backward_bytes(case: Case) -> int:
    """itemsize·B·T·H·(6·K + 4·V): inputs and do read once, o and the gradients written."""
    return gla_forward_backward_bytes(*_dims(case), ITEMSIZE[case.dtype])


# Gradient tolerances, |grad - reference grad| <= atol + rtol·|reference grad|, the reference
# being jax.vjp of the float32 recurrence on the same inputs and cotangent. Measured maxima
# (tests/test_gla_backward.py; smoke and ci shapes, seed 0) of the gradients' magnitudes:
# dq, dk, dv up to ~26 (rms ~3.2), dgk up to ~72 (rms ~10: a sum over the decay window).
# float32: observed max |error| 7.6e-5 (dgk, B4-T1024-H8-K128); beyond rtol = 1e-4 the
#   largest remainder was 2.1e-5; atol = 2e-4 leaves ~10x.
# bfloat16: gradients are returned in bf16 (<= 2^-8 relative rounding each, and the reference
#   grads are rounded too: 2^-7 apart at most; rtol = 2^-6), and the matmul operands are bf16
#   (a random walk over K·C terms that scales with the rms, not with each element). Beyond
#   rtol the largest remainder was 0.046 for dq, dk, dv and 0.19 for dgk (B1-T4096-H2-K128);
#   atol = 2^-1 keeps that at ~40 %, while a real bug (a dropped carry, a wrong decay) is
#   O(rms) = 3-10.
GRAD_TOLERANCES = {
    "float32": Tolerance(atol=2e-4, rtol=1e-4),
    "bfloat16": Tolerance(atol=2**-1, rtol=2**-6),
}


def _point(B: int, T: int, H: int, D: int) -> dict[str, int]:
    return {"B": B, "T": T, "H": H, "K": D, "V": D}


DTYPES = ("float32", "bfloat16")
# smoke: tiny, one T not a multiple of the 64-token chunk, both K; ~12 s on a 2-core CPU in
# interpret mode (compile + 25 calls of pallas and native per case).
SMOKE = (_point(1, 256, 2, 64), _point(1, 200, 2, 64), _point(2, 128, 1, 128))
# ci: batch 1-4, T 512-4096, both K; still affordable in interpret mode (~1 min on CPU).
CI = (
    _point(1, 1024, 4, 64),
    _point(2, 512, 4, 128),
    _point(4, 2048, 4, 64),
    _point(1, 4096, 2, 128),
    _point(4, 1024, 8, 128),
)
FULL = points(
    [
        _point(B, T, H, D)
        for B in (1, 4)
        for T in (256, 1024, 2048, 4096)
        for H in (4, 16)
        for D in (64, 128)
    ],
    # Batch 16 with 4 heads keeps the largest case (B16-T4096-H4-K128) at ~0.5 GiB of inputs.
    [_point(16, T, 4, D) for T in (256, 1024, 2048, 4096) for D in (64, 128)],
)

SPEC = KernelSpec(
    name="gla",
    version=VERSION,
    pallas=_pallas,
    native=_native,
    reference=_reference,
    make_inputs=make_inputs,
    flops=flops,
    bytes_accessed=bytes_accessed,
    tolerances=TOLERANCES,
    matrix={
        "smoke": MatrixProfile(SMOKE, DTYPES, modes=("forward", "backward")),
        "ci": MatrixProfile(CI, DTYPES, modes=("forward", "backward")),
        "full": MatrixProfile(FULL, DTYPES),
    },
    shape_keys=("B", "T", "H", "K", "V"),
    compute_unit="matrix",
    # The backward (dq, dk, dv, dgk) is Pallas too: jax.vjp of chunk_gla runs it.
    modes=("forward", "backward", "forward+backward"),
    backward_flops=backward_flops,
    backward_bytes=backward_bytes,
    grad_tolerances=GRAD_TOLERANCES,
    input_names=("q", "k", "v", "gk"),
    tunables=TUNABLES,
    description="Gated linear attention, chunked (secondary chunking), forward and backward in "
    "Pallas, Yang et al. 2023",
)
