"""The long fuzz run: many hostile inputs per target, counting distinct contract failures.

Same targets and contract as tests/test_fuzz.py (tests/fuzzing.py), but random rather than
derandomized, with more examples, and it never stops at the first failure: it prints how
many inputs it tried and every distinct way the contract broke (exit 5 or a traceback, an
exception escaping ``main``, exit 2 on more than one line, a file outside its folder).

    python benchmarks/fuzz.py --examples 400 --seed 1 [--json fuzz.json]

Run it from the repository root (it imports tests/fuzzing.py). No test asserts these
figures; they are measured and printed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.fuzzing import TARGETS, attempt


def fuzz(target: str, examples: int, rng_seed: int) -> tuple[int, Counter[str]]:
    """Inputs tried and failure signatures (with counts) for one target."""
    strategy, _ = TARGETS[target]
    tried = 0
    failures: Counter[str] = Counter()

    @seed(rng_seed)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],  # no shrinking: every input counts once
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def explore(value: object) -> None:
        nonlocal tried
        tried += 1
        failure = attempt(target, value)
        if failure:
            failures[failure] += 1

    explore()
    return tried, failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=400, help="inputs per target")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    report = {}
    total_tried = 0
    distinct: set[str] = set()
    started = time.perf_counter()
    for target in args.targets.split(","):
        t0 = time.perf_counter()
        tried, failures = fuzz(target, args.examples, args.seed)
        total_tried += tried
        distinct |= {f"{target}: {f}" for f in failures}
        print(
            f"{target:9s} {tried:5d} inputs, {sum(failures.values()):4d} failing, "
            f"{len(failures):3d} distinct failures ({time.perf_counter() - t0:.0f} s)"
        )
        for failure, count in failures.most_common():
            print(f"    {count:4d} × {failure}")
        report[target] = {"inputs": tried, "failures": dict(failures)}
    print(
        f"total: {total_tried} inputs tried, {len(distinct)} distinct failures "
        f"({time.perf_counter() - started:.0f} s)"
    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
