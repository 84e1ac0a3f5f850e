"""FLOPs and bytes models of the chunked GLA forward and backward, for the roofline metrics.

Derivation, per (batch, head), for T tokens cut into chunks of C (K = key dim, V = value dim).
Every token row belongs to one chunk, so per-chunk costs times T/C give per-token costs × T.

Forward. Inter-chunk terms (the recurrent state S is K×V):
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

Backward (kernels.gla.backward), same dense C×C accounting. The forward saves only its inputs,
so the chunk states are recomputed first; that is counted, as FlashAttention's backward counts
its recomputed scores, since every backward call does it:
  states   S <- diag(e^b_C)·S + (k ⊙ e^(b_C - b))ᵀ·v     2·C·K·V per chunk -> 2·K·V per token
  dq_inter = e^b ⊙ (do · S_inᵀ)                          2·C·V·K           -> 2·K·V
  dk_inter = e^(b_C - b) ⊙ (v · dS_outᵀ)                 2·C·V·K           -> 2·K·V
  dv_inter = (k ⊙ e^(b_C - b)) · dS_out                  2·C·K·V           -> 2·K·V
  dS_in    = e^b_C ⊙ dS_out + (q ⊙ e^b)ᵀ · do            2·C·K·V           -> 2·K·V
  A        = (q ⊙ decay) · (k ⊙ decay)ᵀ, recomputed       2·C·C·K           -> 2·C·K
  dA       = do · vᵀ                                      2·C·C·V           -> 2·C·V
  dq_intra = dA · (k ⊙ decay)                             2·C·C·K           -> 2·C·K
  dk_intra = dAᵀ · (q ⊙ decay)                            2·C·C·K           -> 2·C·K
  dv_intra = Aᵀ · do                                      2·C·C·V           -> 2·C·V

  backward flops = 2·B·H·T·(5·K·V + C·(3·K + 2·V))      (2.5× the forward when K = V = C)

Left out, as in the forward: gating multiplies and exponentials, the gates' in-chunk cumsums
(triangular matmuls), dgk's 16-row reverse cumsums and carry (O(C·K) per chunk), and the
kernel's second dA product (it forms dA by rows for dq and by columns for dk: 2·C·V more per
token), all implementation overhead.

Backward bytes, compulsory: read q, k, gk, v and the output cotangent do; write dq, dk, dgk, dv:

  backward bytes = itemsize · B·T·H·(6·K + 3·V)

plus 4·B·H·K·V for each float32 state moved (h0 read and dh0 written with an initial state;
the final state's cotangent read with output_final_state). Forward and backward in one call
(a training step's value-and-grad) read q, k, gk, v and do once and write o and the four
gradients: itemsize · B·T·H·(6·K + 4·V); its FLOPs are the sum of both models.

The recomputed states' round trip (4·K·V/C bytes per token written, then read) and the
second read of k, v, gk are the price of recomputing instead of saving: traffic of this
algorithm, not of the problem, so they are in the kernels' own cost estimates
(``gla_backward_call_costs``), not in the model.
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


def gla_backward_flops(B: int, T: int, H: int, K: int, V: int, chunk: int = DEFAULT_CHUNK) -> int:
    """FLOPs of the chunked backward, the states' recomputation included (module docstring)."""
    return 2 * B * H * T * (5 * K * V + chunk * (3 * K + 2 * V))


def gla_backward_bytes(
    B: int, T: int, H: int, K: int, V: int, itemsize: int, *, n_states: int = 0
) -> int:
    """Compulsory HBM bytes of the backward: q, k, gk, v, do read; dq, dk, dgk, dv written."""
    return itemsize * B * T * H * (6 * K + 3 * V) + n_states * 4 * B * H * K * V


def gla_forward_backward_flops(
    B: int, T: int, H: int, K: int, V: int, chunk: int = DEFAULT_CHUNK
) -> int:
    """Forward and backward in one call (the backward still recomputes the states)."""
    return gla_flops(B, T, H, K, V, chunk) + gla_backward_flops(B, T, H, K, V, chunk)


def gla_forward_backward_bytes(
    B: int, T: int, H: int, K: int, V: int, itemsize: int, *, n_states: int = 0
) -> int:
    """Compulsory bytes of forward and backward in one call: inputs and do read once."""
    return itemsize * B * T * H * (6 * K + 4 * V) + n_states * 4 * B * H * K * V


def gla_backward_call_costs(
    B: int,
    T: int,
    H: int,
    K: int,
    V: int,
    itemsize: int,
    chunk: int = DEFAULT_CHUNK,
    sub: int = SUB_CHUNK,
    *,
    has_h0: bool = False,
    has_dht: bool = False,
    pair_exps: int = 2,
    mask_bytes: int = 0,
) -> dict[str, dict[str, int]]:
    """pl.CostEstimate fields of the two backward pallas_calls: what each really moves.

    ``states`` reads k, v, gk (and h0) and writes the T/C chunk states; ``bwd`` reads q, k,
    v, gk, do and the chunk states (and dht) and writes dq, dk, dv, dgk (and dh0), and its
    constant 0/1 matrices once (``mask_bytes``, the TPU body's). T is the padded length.
    Their FLOPs add up to ``gla_backward_flops``. ``sub`` is the diagonal block's rows;
    ``pair_exps`` the decays per pair (2 in the shared body, 1 in the TPU body's).
    """
    chunk_states = 4 * B * H * (T // chunk) * K * V
    state = 4 * B * H * K * V
    # exps per token and key: e^b, e^(b_C - b), the two off-diagonal factors of each
    # sub-chunk's rows and columns (2·C/sub), the diagonal block's pairwise decays.
    exps = B * H * T * K * (4 + 2 * (chunk // sub) + pair_exps * sub)
    return {
        "states": {
            "flops": 2 * B * H * T * K * V,
            "transcendentals": 2 * B * H * T * K,
            "bytes_accessed": itemsize * B * T * H * (2 * K + V) + chunk_states + has_h0 * state,
        },
        "bwd": {
            "flops": 8 * B * H * T * K * V + 2 * B * H * T * chunk * (3 * K + 2 * V),
            "transcendentals": exps,
            "bytes_accessed": itemsize * B * T * H * (6 * K + 3 * V)
            + chunk_states
            + (has_h0 + has_dht) * state
            + mask_bytes,
        },
    }
