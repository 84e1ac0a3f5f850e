"""CUPTI's kernel time of each case, beside the profiler timer's (the device check's
cross-check): jax's own CUPTI profiler (``jax.experimental.mosaic.gpu.profiler.measure``,
what tokamax's ``cupti`` timer uses), on the GPU, summing the kernels one call launches.

Forward cases only (a backward case times its VJP, which the harness builds).
Usage: python benchmarks/gpu_cupti_check.py OUT.json [--profile smoke] [--iterations 20]
Writes {"cases": {case id: median µs}}; on a machine without a GPU it says so and writes
an empty map (exit 0): CUPTI exists only with jax's CUDA plugin.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args(argv)
    import jax

    found: dict[str, float] = {}
    if jax.default_backend() != "gpu":
        print(
            f"CUPTI: no GPU here (jax's backend is {jax.default_backend()}): nothing measured",
            file=sys.stderr,
        )
    else:
        from jax.experimental.mosaic.gpu import profiler

        from ci_bench.contract.spec import as_inputs
        from kernels.gla import SPEC as GLA
        from kernels.matmul import SPEC as MATMUL

        for spec in (MATMUL, GLA):
            for case in spec.cases(args.profile):
                if case.mode != "forward":
                    continue  # the subject itself; a backward case times its VJP
                inputs = as_inputs(spec.make_inputs(case, jax.random.PRNGKey(42)), spec.name)
                try:
                    measured = profiler.measure(jax.jit(spec.pallas), iterations=args.iterations)
                    _, times = measured(*inputs)
                except Exception as exc:  # reported, the other cases still measured
                    print(f"CUPTI {case.id}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    continue
                if times:
                    found[case.id] = statistics.median(times) * 1000  # ms -> µs
                    print(f"CUPTI {case.id}: {found[case.id]:,.1f} µs", file=sys.stderr)
    args.out.write_text(json.dumps({"cases": found}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
