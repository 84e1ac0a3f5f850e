"""Does the compilation cache outside the workspace pay? First run vs second run.

The workflows keep JAX's persistent compilation cache under the runner's tool cache
(the setup action's ci_venv.sh), where ``actions/checkout``'s ``git clean -ffdx`` cannot delete it.
This runs ``ci-bench run`` twice from a fresh workspace each time (as two CI jobs would) with
one cache folder outside both, and prints each run's wall time, the time spent compiling
(the cases' first calls, ``compile.pallas_ms + compile.native_ms``) and its share.

    python benchmarks/compile_cache.py [--kernel matmul] [--profile smoke] [--runs 2]

Figures are measured on this machine (CPU, Pallas in interpret mode) and printed; no test
asserts them. On a TPU the compile share is larger (Mosaic compiles are slower).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="matmul")
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    ci_bench = Path(sys.executable).parent / "ci-bench"
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "tool-cache" / "jax"
        print(f"{'run':>3}  {'wall s':>7}  {'compile s':>9}  {'share':>6}  cache entries")
        for run in range(1, args.runs + 1):
            workspace = Path(tmp) / f"workspace-{run}"  # a fresh checkout per job
            workspace.mkdir()
            output = workspace / "results.json"
            started = time.perf_counter()
            done = subprocess.run(
                [str(ci_bench), "run", "--kernel", args.kernel, "--profile", args.profile,
                 "--repeats", "3", "--warmup", "1", "--quiet",
                 "--compilation-cache", str(cache), "--output", str(output)],
                cwd=ROOT, capture_output=True, text=True, check=False,
            )  # fmt: skip
            wall = time.perf_counter() - started
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return done.returncode
            cases = json.loads(output.read_text())["cases"]
            compile_s = (
                sum(
                    (c["compile"].get("pallas_ms") or 0) + (c["compile"].get("native_ms") or 0)
                    for c in cases
                )
                / 1e3
            )
            entries = sum(1 for p in cache.rglob("*") if p.is_file())
            print(f"{run:>3}  {wall:7.1f}  {compile_s:9.1f}  {compile_s / wall:6.0%}  {entries}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
