"""What does ci-bench's measuring cost? Per call, and per gate.

1. Per-call timing overhead: for a trivial kernel (a Pallas copy of 8×128 float32) and a
   small real one (the repo's matmul at 128³ float32), the median per-call time of

   - bare:       a plain ``perf_counter`` loop around ``fn(*args)`` + ``block_until_ready``
                 over the same compiled executable;
   - wallclock:  ci-bench's wallclock timer (interleaved rounds with the native impl.);
   - profiler:   ci-bench's profiler timer, its wall and its device (trace) time.

   wallclock - bare is what ci-bench's harness adds to a figure.

2. Gate time: ``ci-bench run --profile smoke`` with 1 and 2 workers, with a cold (empty)
   and a warm compilation cache.

    python benchmarks/overhead.py [--calls 200] [--skip-gate]

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ci_bench.measure.harness import time_interleaved
from ci_bench.measure.timers import timed_rounds

REPO = Path(__file__).resolve().parents[1]


def _copy_kernel(x_ref: Any, o_ref: Any) -> None:
    o_ref[...] = x_ref[...]


def trivial() -> tuple[Callable[..., Any], Callable[..., Any], list[Any]]:
    x = jnp.ones((8, 128), jnp.float32)
    pallas = jax.jit(
        lambda a: pl.pallas_call(
            _copy_kernel, out_shape=jax.ShapeDtypeStruct(a.shape, a.dtype), interpret=True
        )(a)
    )
    return pallas.lower(x).compile(), jax.jit(lambda a: a + 0).lower(x).compile(), [x]


def small_matmul() -> tuple[Callable[..., Any], Callable[..., Any], list[Any]]:
    from kernels.matmul import SPEC

    case = SPEC.case_from_shape([128, 128, 128], "float32")
    args = SPEC.make_inputs(case, jax.random.PRNGKey(0))
    pallas = jax.jit(SPEC.pallas).lower(*args).compile()
    return pallas, jax.jit(SPEC.native).lower(*args).compile(), list(args)


def bare(fn: Callable[..., Any], args: list[Any], calls: int) -> float:
    for _ in range(5):
        jax.block_until_ready(fn(*args))
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def per_call(calls: int) -> None:
    print(f"per-call median, µs ({calls} calls each; Pallas in interpret mode on CPU)")
    print(
        f"{'kernel':<14}{'bare':>9}{'wallclock':>11}{'+overhead':>11}"
        f"{'prof wall':>11}{'prof device':>13}"
    )
    for name, make in (("trivial copy", trivial), ("matmul 128³", small_matmul)):
        pallas, native, args = make()
        b = bare(pallas, args, calls)
        kw: dict[str, Any] = {"warmup": 5, "repeats": calls, "adaptive": None, "rng": None}
        wall = timed_rounds("wallclock", time_interleaved, [pallas, native], args, **kw)
        prof = timed_rounds("profiler", time_interleaved, [pallas, native], args, **kw)
        assert prof.device is not None
        w = statistics.median(wall.samples[0])
        print(
            f"{name:<14}{b * 1e6:>9.1f}{w * 1e6:>11.1f}{(w - b) * 1e6:>+11.1f}"
            f"{statistics.median(prof.wall[0]) * 1e6:>11.1f}"
            f"{statistics.median(prof.device[0]) * 1e6:>13.1f}"
        )


def gate(workers: int, cache: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ci_bench.commands.cli",
            "run",
            "--profile",
            "smoke",
            "--workers",
            str(workers),
            "--compilation-cache",
            str(cache),
            "-q",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"ci-bench run failed ({done.returncode}): {done.stderr[-500:]}")
    return took


def gates() -> None:
    print("\ngate time of `ci-bench run --profile smoke` (matmul + gla), seconds")
    print(f"{'workers':<9}{'cold cache':>12}{'warm cache':>12}")
    for workers in (1, 2):
        with tempfile.TemporaryDirectory(prefix="ci-bench-cache-") as folder:
            cold = gate(workers, Path(folder))
            warm = gate(workers, Path(folder))
        print(f"{workers:<9}{cold:>12.1f}{warm:>12.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--skip-gate", action="store_true")
    args = parser.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}, {os.cpu_count()} CPUs\n")
    per_call(args.calls)
    if not args.skip_gate:
        gates()


if __name__ == "__main__":
    main()
