"""The GLA backward: Pallas (chunk_gla's custom_vjp) against jax.vjp of the native chunked
implementation, forward and backward times and gradient errors against float64.

For each shape and dtype it prints

- forward: the median time of one call of ``chunk_gla`` (Pallas) and ``chunk_gla_native``;
- backward: the median time of applying the VJP alone, residuals computed once outside the
  timed region (for Pallas the residuals are the inputs, so this includes the states'
  recomputation; for native they are what autodiff saved from its scan);
- the largest |error| of dq, dk, dv, dgk of both, against autodiff of a float64 recurrence on
  the same (rounded) inputs and cotangent, and that of the float32 reference itself.

On a CPU, Pallas runs in interpret mode: its times show the interpreter, not a TPU or GPU, and
say nothing about the kernels' speed on hardware (they are printed to see what the PR gate
spends). Figures are measured and printed, never asserted.

    python benchmarks/gla_backward.py [--repeats 5] [--shapes B,T,H,D ...]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ci_bench.spec import Case
from kernels.gla import SPEC, chunk_gla, chunk_gla_native, recurrent_gla

# smoke (all three) and two ci points.
DEFAULT_SHAPES = ("1,256,2,64", "1,200,2,64", "2,128,1,128", "2,512,4,128", "1,1024,4,64")


def median_ms(fn: Callable[..., Any], args: Sequence[Any], repeats: int) -> tuple[float, float]:
    """(first call incl. compilation, median of ``repeats`` later calls), in ms."""
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return first * 1e3, statistics.median(times) * 1e3


def grads64(inputs: Sequence[jax.Array], do: jax.Array) -> list[np.ndarray]:
    """Autodiff of S_t = diag(e^g_t) S_{t-1} + k_tᵀ v_t, o_t = scale·q_t S_t in float64."""
    B, _, H, K = inputs[0].shape
    V = inputs[2].shape[-1]

    def recurrence(q: jax.Array, k: jax.Array, v: jax.Array, g: jax.Array) -> jax.Array:
        def step(S: jax.Array, x: list) -> tuple[jax.Array, jax.Array]:
            q_t, k_t, v_t, g_t = x
            S = jnp.exp(g_t)[..., None] * S + k_t[..., :, None] * v_t[..., None, :]
            return S, K**-0.5 * jnp.einsum("bhk,bhkv->bhv", q_t, S)

        S0 = jnp.zeros((B, H, K, V), jnp.float64)
        _, o = lax.scan(step, S0, [jnp.moveaxis(x, 1, 0) for x in (q, k, v, g)])
        return jnp.moveaxis(o, 0, 1)

    as64 = lambda x: jnp.asarray(np.asarray(x.astype(jnp.float32), np.float64))  # noqa: E731
    with jax.enable_x64(True):
        _, vjp = jax.vjp(recurrence, *(as64(x) for x in inputs))
        return [np.asarray(g) for g in vjp(as64(do))]


def max_errors(grads: Sequence[jax.Array], exact: Sequence[np.ndarray]) -> list[float]:
    return [
        float(np.max(np.abs(np.asarray(g.astype(jnp.float32), np.float64) - e)))
        for g, e in zip(grads, exact, strict=True)
    ]


def measure(shape: tuple[int, int, int, int], dtype: str, repeats: int) -> None:
    B, T, H, D = shape
    case = Case("gla", {"B": B, "T": T, "H": H, "K": D, "V": D}, dtype)
    inputs = SPEC.make_inputs(case, jax.random.key(0))
    do = jax.random.normal(jax.random.key(1), inputs[2].shape).astype(inputs[2].dtype)
    exact = grads64(inputs, do)
    _, ref_vjp = jax.vjp(recurrent_gla, *(x.astype(jnp.float32) for x in inputs))
    ref_err = max_errors(ref_vjp(do.astype(jnp.float32)), exact)
    apply = jax.jit(lambda vjp, do: vjp(do))
    row = {}
    for name, fn in (("pallas", chunk_gla), ("native", chunk_gla_native)):
        fwd = median_ms(jax.jit(fn), inputs, repeats)
        _, vjp = jax.vjp(fn, *inputs)  # residuals, outside the timed region
        bwd = median_ms(apply, (vjp, do), repeats)
        row[name] = (fwd, bwd, max_errors(apply(vjp, do), exact))
    (pf, pb, pe), (nf, nb, ne) = row["pallas"], row["native"]
    print(
        f"{case.id.split('/', 1)[1]:<28}{pf[1]:>9.1f}{nf[1]:>9.1f}{pb[1]:>9.1f}{nb[1]:>9.1f}"
        f"{pf[0] / 1e3:>7.1f}s{pb[0] / 1e3:>6.1f}s{nb[0] / 1e3:>6.1f}s"
        f"   {' '.join(f'{e:.1e}' for e in pe)}   {' '.join(f'{e:.1e}' for e in ne)}"
        f"   {' '.join(f'{e:.1e}' for e in ref_err)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--shapes", nargs="+", default=list(DEFAULT_SHAPES), help="B,T,H,D")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    args = parser.parse_args()
    print(f"jax {jax.__version__}, backend {jax.default_backend()}", end="")
    if jax.default_backend() == "cpu":
        print(": Pallas in INTERPRET mode, times show the interpreter, not a TPU or GPU")
    else:
        print()
    print(
        "median ms of one call (fwd, bwd = the VJP alone); first calls incl. compilation in s"
        " (Pallas fwd, Pallas bwd, native bwd); max |grad error| against float64"
    )
    print(
        f"{'case':<28}{'fwd pal':>9}{'fwd nat':>9}{'bwd pal':>9}{'bwd nat':>9}"
        f"{'1st: pal':>9}{'bwd':>7}{'nat':>7}"
        f"   {'pallas dq dk dv dgk':<32}{'native dq dk dv dgk':<35}{'f32 ref dq dk dv dgk'}"
    )
    for dtype in args.dtypes:
        for text in args.shapes:
            B, T, H, D = (int(x) for x in text.split(","))
            measure((B, T, H, D), dtype, args.repeats)


if __name__ == "__main__":
    main()
