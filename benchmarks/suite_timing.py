"""How long does the README's test command take, and where does the time go?

Runs ``pytest -q -n <workers>`` (the README's command; any test paths or pytest options
after ``--`` narrow it) with a JUnit report, then prints the wall time, the test count, the
machine's load when it started, and the files and tests that took longest (each file's
time is the sum of its tests' setup + call + teardown, so with two workers the files sum to
about twice the wall time). ``--processes`` runs every ``run_cli`` call as a real process
(``CI_BENCH_TEST_PROCESS=1``): the suite as it was before the in-process runner.

    python benchmarks/suite_timing.py [--workers 2] [--top 15] [--processes] [-- tests/x.py]
    python benchmarks/suite_timing.py --junit report.xml   # only read an earlier report

Figures are printed, never asserted; on a shared machine they are noisy (the load average
is printed with them).
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cases(junit: Path) -> list[tuple[str, str, float]]:
    """(file, test, seconds) for every test case in a JUnit report."""
    rows = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        # pytest's classname: the module's dotted path, then any class names
        parts = [p for p in module if p and not p[0].isupper()]
        path = "/".join(parts) + ".py"
        rows.append((path, case.get("name", ""), float(case.get("time", "0") or 0)))
    return rows


def report(junit: Path, top: int) -> None:
    rows = _cases(junit)
    per_file: collections.Counter[str] = collections.Counter()
    for path, _, seconds in rows:
        per_file[path] += seconds
    print(f"tests: {len(rows)}, summed test time: {sum(per_file.values()) / 60:.1f} min")
    print(f"\nslowest {top} files (sum of their tests, s):")
    for path, seconds in per_file.most_common(top):
        print(f"  {seconds:8.1f}  {path}")
    print(f"\nslowest {top} tests (s):")
    for path, name, seconds in sorted(rows, key=lambda r: -r[2])[:top]:
        print(f"  {seconds:8.1f}  {path}::{name}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="2", help="pytest-xdist -n (default 2)")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--processes", action="store_true", help="every run_cli a process")
    parser.add_argument("--junit", type=Path, help="read this report instead of running")
    parser.add_argument("pytest_args", nargs="*", help="after --: paths and pytest options")
    args = parser.parse_args()
    if args.junit is not None:
        report(args.junit, args.top)
        return 0
    junit = Path(tempfile.mkdtemp(prefix="suite-timing-")) / "junit.xml"
    env = dict(os.environ)
    if args.processes:
        env["CI_BENCH_TEST_PROCESS"] = "1"
    command = [sys.executable, "-m", "pytest", "-q", "-n", args.workers, f"--junitxml={junit}"]
    command += args.pytest_args
    load = os.getloadavg()[0]
    start = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=env, check=False)
    wall = time.monotonic() - start
    print(f"\n{' '.join(command[2:])}")
    mode = "every run_cli a process" if args.processes else "run_cli in-process"
    print(
        f"wall: {wall / 60:.1f} min ({wall:.0f} s), exit {done.returncode}, {mode}, "
        f"{os.cpu_count()} CPUs, load average at start {load:.1f}"
    )
    if junit.exists():
        report(junit, args.top)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
