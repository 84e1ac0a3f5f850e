"""What the GLA forward and backward kernels share: matmul policy, masks, layout, dispatch.

Everything in a kernel body stays in the subset both Pallas lowerings accept (Mosaic for TPU,
Triton for GPU): row slices of refs, 2-D elementwise ops, row/column reductions and 2-D
matmuls; no value slicing, no cumsum, no 3-D tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
from jax import lax

from kernels.gla.cost import SUB_CHUNK

Backend = Literal["tpu", "gpu"]
F32 = jnp.float32
Load = Callable[[str, int, int], jax.Array]


def dot(a: jax.Array, b: jax.Array, contract: tuple[int, int], dtype: Any) -> jax.Array:
    """2-D matmul contracting a's dim contract[0] with b's contract[1], float32 accumulation.

    Operands go to the MXU / tensor cores in ``dtype`` (the input dtype: bf16 stays bf16, as
    a hand-written kernel would); float32 operands ask for full float32 precision.
    """
    precision = lax.Precision.HIGHEST if dtype == F32 else None
    dims = (((contract[0],), (contract[1],)), ((), ()))
    return lax.dot_general(
        a.astype(dtype), b.astype(dtype), dims, precision=precision, preferred_element_type=F32
    )


def iota(shape: tuple[int, int], dim: int) -> jax.Array:
    return lax.broadcasted_iota(jnp.int32, shape, dim)


def cumsum_rows(g: jax.Array, lo: int, n: int) -> jax.Array:
    """Rows lo..lo+n of the inclusive in-chunk cumsum of g [C, K], as a masked matmul.

    Mosaic has no cumsum; a 0/1 lower-triangular matmul in float32 is its standard stand-in.
    """
    C = g.shape[0]
    mask = jnp.where(iota((n, C), 1) <= iota((n, C), 0) + lo, 1.0, 0.0).astype(F32)
    return dot(mask, g, (1, 0), F32)


def advance_state(
    st: jax.Array, k: jax.Array, v: jax.Array, b: jax.Array, b_last: jax.Array, dtype: Any
) -> jax.Array:
    """Sᵀ after one chunk: Sᵀ·diag(exp(b_C)) + vᵀ (k ⊙ exp(b_C - b)), every exponent <= 0.

    The state is kept transposed ([V, K]) so the per-key decay exp(b_C) is a row vector
    broadcast over sublanes, which needs no vector transpose on TPU.
    """
    k_g = k * jnp.exp(jnp.minimum(b_last - b, 0.0))
    return st * jnp.exp(b_last) + dot(v, k_g, (0, 0), dtype)


def check_chunk_size(chunk_size: int) -> None:
    if chunk_size <= 0 or chunk_size % SUB_CHUNK:
        raise ValueError(f"chunk_size must be a positive multiple of {SUB_CHUNK}")


def to_bhtd(x: jax.Array, T_pad: int) -> jax.Array:
    """[B, T, H, D] -> [B, H, T_pad, D], zero-padded at the end of the sequence.

    Zero padding is inert in both directions: gk = 0 keeps the state, k = 0 and q = 0 add
    nothing, a zero output cotangent adds no gradient; padded rows are cut on the way out.
    """
    T = x.shape[1]
    if T_pad != T:
        x = jnp.pad(x, ((0, 0), (0, T_pad - T), (0, 0), (0, 0)))
    return x.transpose(0, 2, 1, 3)


def from_bhtd(x: jax.Array, T: int) -> jax.Array:
    """[B, H, T_pad, D] -> [B, T, H, D]."""
    return x.transpose(0, 2, 1, 3)[:, :T]


def default_backend() -> Backend:
    """The variant for the default device: Mosaic on TPU, Triton on GPU.

    On CPU (interpret mode) the "gpu" variant is chosen too: the interpreter copies whole
    operands at every grid step, so its B·H steps run ~10x faster than the "tpu" variant's
    B·H·chunks steps on long sequences. Both are tested in interpret mode.
    """
    return "tpu" if jax.default_backend() == "tpu" else "gpu"


def tpu_interpreter_forced() -> bool:
    """True under jax's TPU interpreter (``pltpu.force_tpu_interpret_mode``, ci-bench's
    ``cpu-interpret = "tpu"``): then the CPU branch runs the TPU variant, as a TPU would.
    Reads jax's trace-context setting; False if this jax does not have it."""
    from jax._src import config as jax_config

    setting = getattr(jax_config, "pallas_tpu_interpret_mode_context_manager", None)
    return setting is not None and setting.value is not None


def where_lowered(variant: Callable[[Backend, bool], Callable[..., Any]], args: Sequence) -> Any:
    """``variant(backend, interpret)(*args)``, the variant chosen where jax lowers.

    Interpreted on CPU, Mosaic for TPU, Triton for GPU: so ``jax.export(...,
    platforms=["tpu"])`` on a CPU machine (ci-bench lower) checks the real TPU lowering.
    """
    return lax.platform_dependent(
        *args,
        cpu=variant("tpu" if tpu_interpreter_forced() else "gpu", True),
        tpu=variant("tpu", False),
        default=variant("gpu", False),
    )


def resolve(interpret: bool | None, backend: Backend | None) -> tuple[bool, Backend]:
    """Explicit (interpret, backend) for a call that named at least one of them."""
    interpret = jax.default_backend() == "cpu" if interpret is None else interpret
    backend = default_backend() if backend is None else backend
    if backend not in ("tpu", "gpu"):
        raise ValueError(f"backend must be 'tpu' or 'gpu', got {backend!r}")
    return interpret, backend
