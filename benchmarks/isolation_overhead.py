"""What does running two versions of a library in one process cost a timed call?

An A/B's base and head kernels run with their own modules in ``sys.modules``
(``ci_bench.contract.isolation``): each call to a side's function that is not the active
side switches them. This times, for the issue-37 layout (SPEC in ``bench/``, kernel in
``mylib/``; the same code on both sides) with ``--modules`` extra repository modules on
per-call time of the compiled kernel called

- bare: the jitted function itself, no side machinery;
- head, held: the head's bound function while the head is active (no switch);
- alternating, unbound: head's and base's jitted functions in turn, no side machinery (two
  executables alternating cost something of their own);
- alternating: head and base in turn inside ``held()``, as a pair's rounds run (one switch
  per call, paid by both sides alike): minus the line above, the switch.

    python benchmarks/isolation_overhead.py [--calls 2000] [--modules 50]

The harness's timed rounds call each side's *compiled* executable (``compile_workload``:
``jax.jit(fn).lower().compile()``), which runs none of the kernel's Python: the switch is paid
while tracing and compiling, never inside a timed call. This measures what a direct call of
a bound function would pay, the upper bound of what isolation could add.

Figures are printed, never asserted; on a shared CPU they are noisy.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import jax

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ci_bench.contract.registry import load_isolated, load_kernels  # noqa: E402
from tests.harness.layouts import git, write_layout  # noqa: E402


def _median_us(fn, args, calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--modules", type=int, default=50, help="extra modules per side")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        repo = write_layout(Path(tmp) / "lib", "package")
        helpers = repo / "mylib" / "helpers"
        helpers.mkdir()
        (helpers / "__init__.py").write_text(
            "".join(f"from mylib.helpers import h{i}\n" for i in range(args.modules))
        )
        for i in range(args.modules):
            (helpers / f"h{i}.py").write_text(f"VALUE = {i}\n")
        kernel = repo / "mylib" / "kernels" / "scale.py"
        kernel.write_text(kernel.read_text() + "\nimport mylib.helpers  # noqa\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "helpers")
        base_tree = Path(tmp) / "base"
        git(repo, "worktree", "add", "-q", "--detach", str(base_tree), "main")

        head = load_kernels(["bench.scale_spec"], repo)["scale"]
        isolated = load_isolated(
            base_tree, ["bench.scale_spec"], head_tree=repo, base_tree=base_tree
        )
        bound_head = isolated.head({"scale": head})["scale"]
        base = isolated.base["scale"]
        x = jax.numpy.ones((512, 256), jax.numpy.float32)
        for fn in (head.pallas, bound_head.pallas, base.pallas):
            jax.block_until_ready(fn(x))
        bare = _median_us(head.pallas, (x,), args.calls)
        held = _median_us(bound_head.pallas, (x,), args.calls)

        raw = base.pallas.__wrapped__

        def unbound(y: jax.Array) -> jax.Array:
            jax.block_until_ready(head.pallas(y))
            return raw(y)

        plain = _median_us(unbound, (x,), args.calls // 2) / 2

        def alternating(y: jax.Array) -> jax.Array:
            jax.block_until_ready(bound_head.pallas(y))
            return base.pallas(y)

        with isolated.sides.held():
            pair = _median_us(alternating, (x,), args.calls // 2) / 2
        modules = len(isolated.sides.head.modules), len(isolated.sides.base.modules)

    print(f"repository modules per side (head, base): {modules}")
    print(f"bare jitted call:                  {bare:8.1f} µs")
    print(f"head's bound call, no switch:      {held:8.1f} µs  (+{held - bare:.1f})")
    print(f"head/base alternating, unbound:    {plain:8.1f} µs  (+{plain - bare:.1f})")
    print(f"head/base alternating, per call:   {pair:8.1f} µs  (+{pair - plain:.1f}: the switch)")


if __name__ == "__main__":
    main()
