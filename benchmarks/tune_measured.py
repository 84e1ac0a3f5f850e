"""The model's ranking against a published measured block-size sweep on a TPU v5e.

pallas-forge (github.com/linhkid/pallas-forge, notebooks/05_reproduce_figures.ipynb, run on
a Colab TPU v5e) times its tiled bf16 matmul at 2048³ over block_m, block_k, block_n in
{64, 128, 256, 512}: 36 configs lower, the best is (512, 512, 512) at 0.318 ms. Its kernel,
as its documentation describes it: grid (M/bm, N/bn, K/bk), blocks (bm, bk) and (bk, bn),
the float32 output block itself the accumulator (zeroed at k = 0), cast to bf16 by XLA
afterwards. This module declares a kernel with that grid and those BlockSpecs (written
here from that description) with tunables, runs ``ci-bench tune`` on it for v5e, and
compares the model's ranking with the measured one: where the measured winner lands,
the model's top 5 by their measured times, and Spearman's rank correlation.

    python benchmarks/tune_measured.py          # about 10 s of CPU
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ci_bench.spec import KernelSpec, MatrixProfile, Tolerance, Tunables, grid

# (block_m, block_k, block_n) -> measured median ms (the notebook's printed sweep).
MEASURED = {
    (64, 128, 128): 2.665, (64, 128, 256): 1.588, (64, 128, 512): 1.007,
    (64, 256, 128): 1.693, (64, 256, 256): 1.092, (64, 256, 512): 0.770,
    (64, 512, 128): 1.143, (64, 512, 256): 0.794, (64, 512, 512): 0.681,
    (128, 128, 128): 1.603, (128, 128, 256): 0.972, (128, 128, 512): 0.694,
    (128, 256, 128): 1.020, (128, 256, 256): 0.693, (128, 256, 512): 0.530,
    (128, 512, 128): 0.754, (128, 512, 256): 0.553, (128, 512, 512): 0.457,
    (256, 128, 128): 0.974, (256, 128, 256): 0.646, (256, 128, 512): 0.496,
    (256, 256, 128): 0.713, (256, 256, 256): 0.520, (256, 256, 512): 0.416,
    (256, 512, 128): 0.552, (256, 512, 256): 0.437, (256, 512, 512): 0.380,
    (512, 128, 128): 0.668, (512, 128, 256): 0.488, (512, 128, 512): 0.389,
    (512, 256, 128): 0.538, (512, 256, 256): 0.400, (512, 256, 512): 0.387,
    (512, 512, 128): 0.476, (512, 512, 256): 0.373, (512, 512, 512): 0.318,
}  # fmt: skip
SIZES = (64, 128, 256, 512)


def _body(x_ref, w_ref, o_ref):
    @pl.when(pl.program_id(2) == 0)
    def _zero():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)


def _check(block_m: int, block_k: int, block_n: int) -> tuple[int, int, int]:
    """Mosaic's rule as the notebook's failures show it: lanes (bk, bn) of 128."""
    if block_k % 128 or block_n % 128 or block_m % 8:
        raise ValueError(f"block_k={block_k}, block_n={block_n}: both need 128 lanes")
    return block_m, block_k, block_n


def with_blocks(blocks: tuple[int, int, int]):
    bm, bk, bn = blocks

    def call(x: jax.Array, w: jax.Array, interpret: bool) -> jax.Array:
        (M, K), N = x.shape, w.shape[1]
        return pl.pallas_call(
            _body,
            grid=(M // bm, N // bn, K // bk),
            in_specs=[
                pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                pl.BlockSpec((bk, bn), lambda i, j, k: (k, j)),
            ],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
            out_shape=jax.ShapeDtypeStruct((M, N), jnp.float32),
            interpret=interpret,
        )(x, w)

    @jax.jit
    def matmul(x: jax.Array, w: jax.Array) -> jax.Array:
        out = jax.lax.platform_dependent(
            x,
            w,
            cpu=functools.partial(call, interpret=True),
            default=functools.partial(call, interpret=False),
        )
        return out.astype(x.dtype)

    return matmul


TUNABLES = Tunables(
    space={"block_m": SIZES, "block_k": SIZES, "block_n": SIZES},
    default={"block_m": 128, "block_k": 128, "block_n": 128},
    config=_check,
    build=with_blocks,
)


def _inputs(case, key):
    kx, kw = jax.random.split(key)
    shape = (case["M"], case["K"]), (case["K"], case["N"])
    keys = (kx, kw)
    return tuple(jax.random.normal(k, s, jnp.bfloat16) for k, s in zip(keys, shape, strict=True))


SPEC = KernelSpec(
    name="forge_matmul",
    version="0.1.0",
    pallas=with_blocks((128, 128, 128)),
    native=jnp.matmul,
    reference=lambda x, w: jnp.matmul(x.astype(jnp.float32), w.astype(jnp.float32)),
    make_inputs=_inputs,
    input_specs=lambda case: (
        jax.ShapeDtypeStruct((case["M"], case["K"]), jnp.bfloat16),
        jax.ShapeDtypeStruct((case["K"], case["N"]), jnp.bfloat16),
    ),
    flops=lambda case: 2 * case["M"] * case["K"] * case["N"],
    bytes_accessed=lambda case: (
        2 * (case["M"] * case["K"] + case["K"] * case["N"]) + 4 * case["M"] * case["N"]
    ),
    tolerances={"bfloat16": Tolerance(atol=0.5, rtol=0.05)},
    matrix={"smoke": MatrixProfile(grid(M=(2048,), K=(2048,), N=(2048,)), ("bfloat16",))},
    shape_keys=("M", "K", "N"),
    compute_unit="matrix",
    tunables=TUNABLES,
)


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    for position, i in enumerate(order):
        ranks[i] = float(position)
    return ranks


def _spearman(a: list[float], b: list[float]) -> float:
    ra, rb = _ranks(a), _ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb, strict=False)) / (n * (n * n - 1))


def main() -> None:
    here = Path(__file__).resolve()
    args = [sys.executable, "-m", "ci_bench.commands.cli", "tune", "--kernel-module", str(here)]
    args += ["--kernel", "forge_matmul", "--chip", "v5e", "--format", "json", "-q"]
    done = subprocess.run(args, cwd=here.parents[1], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"ci-bench tune exited {done.returncode}: {done.stderr}")
    case = json.loads(done.stdout)["cases"][0]
    modelled = {
        tuple(c["config"].values()): c["chips"]["v5e"]["modelled_us"] / 1000
        for c in case["candidates"]
        if c["lowers"] and c["chips"]["v5e"]["fits"]
    }
    dropped = [tuple(c["config"].values()) for c in case["candidates"] if c["why_not"]]
    both = [cfg for cfg in MEASURED if cfg in modelled]
    print(
        f"{case['space']} candidates, {len(dropped)} dropped before tracing, "
        f"{len(modelled)} modelled; {len(MEASURED)} measured in the sweep, {len(both)} in both"
    )
    print(
        f"dropped here and failed to lower there: "
        f"{sum(cfg not in MEASURED for cfg in dropped)} of {len(dropped)}"
    )
    by_model = sorted(both, key=modelled.__getitem__)
    by_measure = sorted(both, key=MEASURED.__getitem__)
    print(
        f"{'model rank':>10}  {'(bm, bk, bn)':<18} {'modelled ms':>11} {'measured ms':>11}"
        f"  {'measured rank':>13}"
    )
    for rank, cfg in enumerate(by_model, start=1):
        print(
            f"{rank:>10}  {cfg!s:<18} {modelled[cfg]:>11.3f} {MEASURED[cfg]:>11.3f}"
            f"  {by_measure.index(cfg) + 1:>13}"
        )
    winner = by_measure[0]
    print(
        f"measured winner {winner} ({MEASURED[winner]:.3f} ms): model rank "
        f"{by_model.index(winner) + 1}; the model's top 5 measure "
        f"{', '.join(f'{MEASURED[c]:.3f}' for c in by_model[:5])} ms"
    )
    rho = _spearman([modelled[c] for c in both], [MEASURED[c] for c in both])
    print(f"Spearman rank correlation, modelled vs measured, {len(both)} configs: {rho:.3f}")


if __name__ == "__main__":
    main()
