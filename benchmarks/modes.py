"""What the backward modes measure, against the naive way and against XLA's own counts.

1. Per case, median ms of the forward, the VJP alone (``backward``) and ``forward+backward``
   as ci-bench times them, and of the naive wrapper a kernel engineer writes without modes,
   ``jax.jit(jax.grad(lambda *x: sum(f(*x) * ct)))``. What the naive figure holds depends
   on the kernel: XLA drops a forward whose output the gradient does not need (a matmul's
   backward needs only a and b) and keeps one that makes the residuals (attention's
   statistics), so it is neither "the backward" nor "forward + backward" in general.
   ``sum`` is ``fwd+bwd / (fwd + bwd)``.
2. Per mode, the FLOPs model (declared or derived) against XLA's count for the native
   implementation in that mode (``cost_check.ratio``): the derived 2x rule against an
   independent count, and jax's flash attention's declared 2.5x against XLA's 2x for a
   backward that keeps its residuals.
3. Gate time of ``ci-bench run --profile smoke`` and ``--profile ci``, cold and warm
   compilation cache (``--gate``; minutes).

    python benchmarks/modes.py [--repeats 10] [--gate]

Figures are measured and printed, never asserted; on a shared CPU they are noisy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from ci_bench.contract.spec import Case, KernelSpec, as_inputs
from ci_bench.measure.harness import HarnessSettings, run_case
from ci_bench.measure.modes import cotangent_like

REPO = Path(__file__).resolve().parents[1]


def naive_grad_ms(spec: KernelSpec, case: Case, repeats: int) -> float:
    """The wrapper ci-bench replaces: jit(grad) of a weighted sum, forward included."""
    inputs = as_inputs(spec.make_inputs(case, jax.random.PRNGKey(42)), spec.name)
    ct = cotangent_like(jax.eval_shape(spec.pallas, *inputs), 42)

    def loss(*x: Any) -> jax.Array:
        return jnp.sum(spec.pallas(*x).astype(jnp.float32) * ct.astype(jnp.float32))

    grad = jax.jit(jax.grad(loss, argnums=tuple(range(len(inputs)))))
    jax.block_until_ready(grad(*inputs))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(grad(*inputs))
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def modes_table(spec: KernelSpec, points: list[Case], repeats: int) -> None:
    settings = HarnessSettings(warmup=2, repeats=repeats)
    print(f"\n{spec.name}: median ms (Pallas subject); cost model / XLA's count for native")
    head = f"{'case':38} {'fwd':>8} {'bwd':>8} {'fwd+bwd':>8} {'naive':>8} {'sum':>6}"
    print(head + "   flops/XLA fwd, bwd, fwd+bwd (source)")
    for case in points:
        results = {
            m: run_case(spec, case.with_mode(m), settings, lambda d: (None, None))
            for m in spec.modes
        }
        bad = [r.error for r in results.values() if r.status != "ok"]
        if bad:
            print(f"{case.id:38} error: {bad[0]}")
            continue
        ms = {m: statistics.median(r.pallas.samples_ms) for m, r in results.items()}
        naive = naive_grad_ms(spec, case, repeats)
        both = ms.get("forward+backward")
        adds = both / (ms["forward"] + ms["backward"]) if both else float("nan")
        ratios = ", ".join(
            f"{r.cost_check.ratio:.3f}" if r.cost_check and r.cost_check.ratio else "–"
            for r in results.values()
        )
        source = results["backward"].metrics.flops_source
        print(
            f"{case.id:38} {ms['forward']:8.3f} {ms['backward']:8.3f} {both or float('nan'):8.3f}"
            f" {naive:8.3f} {adds:6.2f}   {ratios} ({source})"
        )


def gate(profile: str, cache: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ci_bench.commands.cli", "run", "--profile", profile,
         "--compilation-cache", str(cache), "-q", "--format", "json"],
        cwd=REPO, capture_output=True, text=True, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    if done.returncode != 0:
        print(f"  exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    return time.perf_counter() - start


def gates() -> None:
    print("\ngate time of `ci-bench run --profile P` (the project's kernels), seconds")
    print(f"{'profile':8} {'cold':>8} {'warm':>8}")
    for profile in ("smoke", "ci"):
        with tempfile.TemporaryDirectory() as folder:
            cold = gate(profile, Path(folder))
            warm = gate(profile, Path(folder))
        print(f"{profile:8} {cold:8.1f} {warm:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--gate", action="store_true", help="also time the smoke and ci gates")
    args = parser.parse_args()
    from jax.experimental.pallas import tpu as pltpu

    from kernels.matmul import SPEC as MATMUL

    matmul_points = [
        Case("matmul", {"B": 1, "M": s, "K": s, "N": s}, d)
        for s in (128, 256, 512)
        for d in ("float32", "bfloat16")
    ]
    modes_table(MATMUL, matmul_points, args.repeats)
    sys.path.insert(0, str(REPO / "examples" / "flash_attention"))
    from flash_attention import SPEC as FLASH

    pltpu.set_tpu_interpret_mode()  # jax's TPU-only kernel: under the TPU interpreter on CPU
    flash_points = [
        Case("flash_attention", {"B": 1, "H": 2, "T": t, "D": 64}, "float32") for t in (256, 512)
    ]
    modes_table(FLASH, flash_points, max(3, args.repeats // 3))
    if args.gate:
        gates()


if __name__ == "__main__":
    main()
