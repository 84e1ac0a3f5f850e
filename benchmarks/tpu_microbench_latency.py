"""What a chain of small dependent MXU products costs a loop iteration: chip microbenchmarks
(issue 51), run from ``tpu_microbench_dma.py`` (its main, provenance and table:
``--only mxu-chain``).

jax's paged attention's eight validation points split, by least squares over their grid
steps, loop iterations and pages (``paged_iterations.py``, the chip's stored times), into
0.17 µs a grid step, 17.2 ns a page and 0.36 µs a loop iteration: the first two are the
microbenchmarks' (a near-empty step 0.199 µs; 9.4 ns a copy, a key and a value page each),
the last is 0.2 µs more than the ``loop`` microbenchmark's iteration waiting on its copies
(0.16 µs), and it is what the model does not see. What paged attention's iteration has that
the microbenchmark's does not is the attention itself: a chain of two small dependent products
on the MXU (q·kᵀ, an exp, then p·v), each waiting on the last one's result, a latency no
static schedule shows (a result pop stalls until the MXU has it) and no throughput figure of
the model counts. These benchmarks time such chains alone, with no copy:

  mxu-chain  a fori_loop of n iterations, each one product x = dot(x, w) whose result is
          the next one's operand (x (m, k), w (k, k), VMEM-resident): µs a product by the
          slope over n, for m = 8 and 128, k = 128 and 512, bfloat16 and float32 operands,
          each iteration loading its operands from VMEM (one case with them held instead);
          two independent chains in one loop (latency-bound: the same time an iteration);
          paged attention's pair (s = q·kᵀ over 128 tokens, p = exp(s - max s), x = p·v);
          and one dependent vector multiply a step, the loop's own cost.

Each row is the slope (µs an iteration) between n = 256 and n = 1024 iterations (each the
median of ``--repeats`` calls), and the cycles at v5e's 1.5 GHz clock (the model's
``Chip.clock_hz``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from tpu_microbench import device_us, one_line

INTERPRET = False  # set by tpu_microbench_dma.main: off a TPU, Pallas runs interpreted
CLOCK_HZ = 1.5e9  # v5e's TensorCore clock (ci_bench.measure.model.chips: jax's peak / MXUs)
Step = Callable[[jax.Array, tuple[jax.Array, ...]], jax.Array]


def chain_call(
    n: int, m: int, k: int, dtype: Any, step: Step, held: bool = False
) -> tuple[Any, tuple[Any, ...]]:
    """One kernel: x (m, k) float32 and two operands of ``dtype``, each two (k, k) slots in
    VMEM, then ``n`` iterations of ``x = step(x, operands)``, x written out (so no iteration
    is dead). Each iteration loads its operands from the slot ``i % 2``, as paged attention
    loads each block's keys and values, unless ``held``: then one slot, loaded before the
    loop (the compiler may keep the MXU's weights)."""
    x = jnp.full((m, k), 1.0 / k, jnp.float32)
    eye = jnp.eye(k, dtype=jnp.float32)
    operands = tuple(jnp.stack([eye * s, eye * s * 0.5]).astype(dtype) for s in (1.0, 0.5))

    def kernel(x_ref: Any, a_ref: Any, b_ref: Any, o_ref: Any) -> None:
        def body(i: Any, v: jax.Array) -> jax.Array:
            slot = 0 if held else jax.lax.rem(i, 2)
            return step(v, (a_ref[slot], b_ref[slot]))

        if held:
            ab = (a_ref[0], b_ref[0])
            o_ref[...] = jax.lax.fori_loop(0, n, lambda _, v: step(v, ab), x_ref[...])
        else:
            o_ref[...] = jax.lax.fori_loop(0, n, body, x_ref[...])

    call = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((m, k), jnp.float32),
        interpret=INTERPRET,
    )
    return call, (x, *operands)


def one_dot(x: jax.Array, ab: tuple[jax.Array, ...]) -> jax.Array:
    return jnp.dot(x.astype(ab[0].dtype), ab[0], preferred_element_type=jnp.float32)


def two_chains(x: jax.Array, ab: tuple[jax.Array, ...]) -> jax.Array:
    """Two products that do not wait on each other (the rows' halves), then joined."""
    half = x.shape[0] // 2
    top = jnp.dot(x[:half].astype(ab[0].dtype), ab[0], preferred_element_type=jnp.float32)
    low = jnp.dot(x[half:].astype(ab[1].dtype), ab[1], preferred_element_type=jnp.float32)
    return jnp.concatenate([top, low], axis=0)


def attention_pair(x: jax.Array, ab: tuple[jax.Array, ...]) -> jax.Array:
    """Paged attention's iteration without its copies: q (m, 128) against 128 keys, the
    softmax's exp, then the values (ab[0] as keys, ab[1] as values)."""
    keys, values = ab
    s = jax.lax.dot_general(
        x.astype(keys.dtype), keys, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32
    )
    p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
    return jnp.dot(p.astype(values.dtype), values, preferred_element_type=jnp.float32)


def vector_step(x: jax.Array, ab: tuple[jax.Array, ...]) -> jax.Array:
    return x * 1.0001


# (case, m, k, dtype, step, operands held) of every chain; --quick keeps two
CHAINS: tuple[tuple[str, int, int, str, Step, bool], ...] = (
    ("one dot, (8, 128) x (128, 128) bfloat16, operands held", 8, 128, "bfloat16", one_dot, True),
    ("one dot, (8, 128) x (128, 128) bfloat16", 8, 128, "bfloat16", one_dot, False),
    ("one dot, (8, 128) x (128, 128) float32", 8, 128, "float32", one_dot, False),
    ("one dot, (128, 128) x (128, 128) bfloat16", 128, 128, "bfloat16", one_dot, False),
    ("one dot, (8, 512) x (512, 512) bfloat16", 8, 512, "bfloat16", one_dot, False),
    (
        "two independent dots, (8, 128) x (128, 128) bfloat16",
        16,
        128,
        "bfloat16",
        two_chains,
        False,
    ),
    ("attention pair, q (8, 128), 128 keys, bfloat16", 8, 128, "bfloat16", attention_pair, False),
    ("attention pair, q (8, 128), 128 keys, float32", 8, 128, "float32", attention_pair, False),
    ("one vector multiply, (8, 128) float32", 8, 128, "float32", vector_step, False),
)


def bench_mxu_chain(quick: bool, repeats: int) -> list[dict[str, Any]]:
    counts = (4, 16) if quick else (256, 1024)
    chains = (CHAINS[0], CHAINS[6]) if quick else CHAINS
    found: list[dict[str, Any]] = []
    for case, m, k, dtype, step, held in chains:
        try:
            times = [device_us(*chain_call(n, m, k, dtype, step, held), repeats) for n in counts]
        except Exception as exc:  # a chain the compiler refuses is said; the rest still run
            found.append({"bench": "mxu-chain", "case": case, "error": one_line(exc)})
            continue
        per = (times[1] - times[0]) / (counts[1] - counts[0])
        found.append(
            {
                "bench": "mxu-chain",
                "case": case,
                "us": per,
                "cycles": per * 1e-6 * CLOCK_HZ,
                "iterations": list(counts),
                "call_us": times,
            }
        )
    return found


LATENCY_BENCH = {"mxu-chain": bench_mxu_chain}
