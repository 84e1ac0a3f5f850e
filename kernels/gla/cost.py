"""FLOPs and bytes model of the chunked GLA forward pass, for the roofline metrics.

Derivation, per (batch, head), for T tokens cut into chunks of C (K = key dim, V = value dim).
Every token row belongs to one chunk, so per-chunk costs times T/C give per-token costs × T.

Inter-chunk terms (the recurrent state S is K×V):
  o_inter = (q ⊙ exp(b)) · S                         2·C·K·V per chunk -> 2·K·V per token
  S <- diag(exp(b_C)) · S + (k ⊙ exp(b_C - b))ᵀ · v   2·C·K·V per chunk -> 2·K·V per token
Intra-chunk terms (gated causal attention inside the chunk, computed densely as C×C):
  A = (q ⊙ decay) · (k ⊙ decay)ᵀ                     2·C·C·K per chunk -> 2·C·K per token
  o_intra = A · v                                     2·C·C·V per chunk -> 2·C·V per token

  flops = 2·B·H·T·(2·K·V + C·(K + V))

Lower-order work is left out: the O(C·K) gating multiplies and exponentials, the state decay
(K·V per chunk) and the in-chunk cumulative sum of the gates (C·K adds; the kernel does it as a
triangular matmul, which is implementation overhead, not useful work). For C = 64 and
K = V >= 64 the omitted terms are a few per cent of the total. T is the requested length, not
the length padded to a multiple of C, so the model describes the problem, not the tiling.

Bytes: the compulsory HBM traffic of one call, each tensor moved once at the input dtype:
read q, k, gk ([B, T, H, K] each) and v ([B, T, H, V]), write o ([B, T, H, V]):

  bytes = itemsize · B·T·H·(3·K + 2·V)

plus 4·B·H·K·V (float32) for each of the optional initial and final states. The wrapper's
padding and [B, T, H, ·] -> [B, H, T, ·] transposes are not counted: they are overhead a fused
layout would avoid, and counting them would flatter the achieved bandwidth.
"""

from __future__ import annotations

DEFAULT_CHUNK = 64
SUB_CHUNK = 16
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}


def gla_flops(B: int, T: int, H: int, K: int, V: int, chunk: int = DEFAULT_CHUNK) -> int:
    """Useful FLOPs of the chunked forward pass (see the module docstring)."""
    return 2 * B * H * T * (2 * K * V + chunk * (K + V))


def gla_bytes(B: int, T: int, H: int, K: int, V: int, itemsize: int, *, n_states: int = 0) -> int:
    """Compulsory HBM bytes: q, k, gk, v read once, o written once, plus float32 states."""
    return itemsize * B * T * H * (3 * K + 2 * V) + n_states * 4 * B * H * K * V


def gla_transcendentals(
    B: int, T: int, H: int, K: int, chunk: int = DEFAULT_CHUNK, sub: int = SUB_CHUNK
) -> int:
    """Exponentials the kernel evaluates (for pl.CostEstimate; not used by the roofline)."""
    # Per token: exp(b) for q and exp(b_C - b) for k (2·K), the off-diagonal sub-chunk
    # gates (K for q, plus K per row of the chunk for every sub-chunk: C/sub·K), and the
    # pairwise diagonal-block decays (sub·K).
    per_token = 2 * K + K + (chunk // sub) * K + sub * K
    return B * H * T * per_token
