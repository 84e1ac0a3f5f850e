"""GLA in float32 on a TPU (issue 53): what the kernel's float32 matmul precision costs.

    python benchmarks/tpu_gla_precision.py --out "$OUT"          # on a TPU host, repo root
    python benchmarks/tpu_gla_precision.py --out /tmp/x --quick  # the plumbing, on a CPU

The kernels multiply float32 operands at HIGHEST precision (``kernels.gla.common.dot``: six
bfloat16 MXU passes; 4.3x a bfloat16 dot's time on a v5e, benchmarks/tpu_microbench.py),
and so does the baseline, XLA's chunked formula (``kernels.gla.native``). Policy "one pass"
is the question whether the float32 forward's distance from XLA's (issue 53: 1.22-1.69x) is
the price of that precision: a float32 x float32 product of real operands is cast to
bfloat16 for the MXU and accumulated in float32 (jax's DEFAULT on a TPU). The 0/1 gathers
and the in-chunk cumulative gate sums stay exact in both (layout, not arithmetic; rounding
the cumulative gates would move every decay). Per float32 ci case: device time of the
forward and of forward+backward (``jax.grad``) under each policy and XLA's, and each one's
largest error against the float32 recurrence at HIGHEST precision.

On a TPU v5e (benchmarks/data/tpu_v5e_gla_precision_2026-12-06.json) one pass bought
1.21-1.29x on the forward and 1.21-1.39x on forward+backward, at 300x the error of the kernel
and of XLA (7e-2 against 2.3e-4 on outputs of magnitude ~3): not a trade the comparison with
XLA can make, so the kernels keep HIGHEST.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from tpu_microbench import device_us, provenance  # noqa: E402

from ci_bench.contract.spec import Case  # noqa: E402
from kernels.gla import SPEC, backward_chunk, backward_tpu, common, forward_tpu  # noqa: E402
from kernels.gla.common import F32  # noqa: E402

EXACT_DOT, EXACT_CUMSUM = common.dot, common.cumsum_rows
# Modules whose kernel code calls ``dot`` (and ``cumsum_rows``) by their own global name.
CALLERS = (common, forward_tpu, backward_tpu, backward_chunk)
# The ci profile's float32 points, the one furthest from issue 53's bar (1.69x XLA) first.
SHAPES = ((4, 1024, 8, 128), (2, 512, 4, 128), (1, 1024, 4, 64), (4, 2048, 4, 64))
SHAPES += ((1, 4096, 2, 128),)


def one_pass_dot(a: jax.Array, b: jax.Array, contract: tuple[int, int], dtype: Any) -> jax.Array:
    """XLA's DEFAULT on a TPU: float32 operands make one bfloat16 pass."""
    return EXACT_DOT(a, b, contract, jnp.bfloat16 if dtype == F32 else dtype)


def exact_cumsum(g: jax.Array, lo: int, n: int) -> jax.Array:
    """``common.cumsum_rows`` with the exact dot, whatever ``common.dot`` is."""
    C = g.shape[0]
    mask = jnp.where(common.iota((n, C), 1) <= common.iota((n, C), 0) + lo, 1.0, 0.0)
    return EXACT_DOT(mask.astype(F32), g, (1, 0), F32)


def use(policy: str) -> None:
    dot = one_pass_dot if policy == "one pass" else EXACT_DOT
    for module in CALLERS:
        if hasattr(module, "dot"):
            module.dot = dot
        if hasattr(module, "cumsum_rows"):
            module.cumsum_rows = exact_cumsum if policy == "one pass" else EXACT_CUMSUM
    jax.clear_caches()


def grads_of(fn: Callable[..., jax.Array]) -> Callable[..., Any]:
    def loss(q: jax.Array, k: jax.Array, v: jax.Array, g: jax.Array, do: jax.Array) -> Any:
        return jnp.sum(fn(q, k, v, g).astype(F32) * do)

    return jax.grad(loss, argnums=(0, 1, 2, 3))


def measure(point: tuple[int, ...], repeats: int) -> list[dict[str, Any]]:
    B, T, H, D = point
    case = Case("gla", {"B": B, "T": T, "H": H, "K": D, "V": D}, "float32")
    args = SPEC.make_inputs(case, jax.random.PRNGKey(0))
    do = jax.random.normal(jax.random.PRNGKey(1), args[2].shape, F32)
    with jax.default_matmul_precision("highest"):  # on a TPU, DEFAULT is one bf16 pass
        want = jax.jit(SPEC.reference)(*args)
        want_grads = jax.jit(grads_of(SPEC.reference))(*args, do)
    rows = []
    for policy in ("xla", "highest", "one pass"):
        use("highest" if policy == "xla" else policy)
        fn = SPEC.native if policy == "xla" else SPEC.pallas
        row: dict[str, Any] = {"case": case.id, "policy": policy}
        got = jax.jit(fn)(*args)
        row["max_err"] = float(jnp.max(jnp.abs(got - want)))
        got_grads = jax.jit(grads_of(fn))(*args, do)
        row["max_grad_err"] = {
            name: float(jnp.max(jnp.abs(g - w)))
            for name, g, w in zip(("q", "k", "v", "gk"), got_grads, want_grads, strict=True)
        }
        row["forward_us"] = device_us(fn, args, repeats)
        row["forward_backward_us"] = device_us(grads_of(fn), (*args, do), repeats)
        rows.append(row)
        print(json.dumps(row), flush=True)
    use("highest")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quick", action="store_true", help="a tiny shape, on a CPU")
    parser.add_argument("--repeats", type=int, default=10)
    opts = parser.parse_args()
    opts.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for point in ((1, 128, 1, 64),) if opts.quick else SHAPES:
        rows += measure(point, 2 if opts.quick else opts.repeats)
        data = {"provenance": {**provenance(), "script": "benchmarks/tpu_gla_precision.py"}}
        data["rows"] = rows
        (opts.out / "gla_precision.json").write_text(json.dumps(data, indent=1))
    for row in rows:
        errs = " ".join(f"{v:.1e}" for v in row["max_grad_err"].values())
        print(
            f"{row['case']:34} {row['policy']:9} fwd {row['forward_us']:9.1f} µs  "
            f"fwd+bwd {row['forward_backward_us']:9.1f} µs  err {row['max_err']:.1e}  "
            f"grads {errs}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
