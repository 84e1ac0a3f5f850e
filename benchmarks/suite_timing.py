"""How long does the README's test command take, and where does the time go?

Runs ``pytest -q -n <workers>`` (the README's command; any test paths or pytest options
after ``--`` narrow it) with a JUnit report, then prints the wall time, the test count, the
machine's load when it started, and the files and tests that took longest (each file's
time is the sum of its tests' setup + call + teardown, so with two workers the files sum to
about twice the wall time). ``--processes`` runs every ``run_cli`` call as a real process
(``CI_BENCH_TEST_PROCESS=1``): the suite as it was before the in-process runner.

    python benchmarks/suite_timing.py [--workers 2] [--top 15] [--processes] [-- tests/x.py]
    python benchmarks/suite_timing.py --junit report.xml   # only read an earlier report
    python benchmarks/suite_timing.py --compare before.xml after.xml [--files F ...]

``--compare`` attributes a change in the suite's time between two reports (two commits'
runs on one machine): the summed time of the tests both ran (what the change costs the
tests that were there), of the tests only the later one ran, and of those in ``--files``
(a change's own test files), each also divided by the worker count (its share of the wall).

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


def compare(before: Path, after: Path, files: list[str], workers: int) -> None:
    """The test time two reports differ by, split by where it went."""
    old = {(p, n): t for p, n, t in _cases(before)}
    new = {(p, n): t for p, n, t in _cases(after)}
    both = old.keys() & new.keys()
    added = new.keys() - old.keys()
    own = {k for k in added if k[0] in files}
    rows = [
        ("tests in both, before", sum(old[k] for k in both), len(both)),
        ("tests in both, after", sum(new[k] for k in both), len(both)),
        ("tests only before", sum(old[k] for k in old.keys() - new.keys()), len(old) - len(both)),
        ("tests only after", sum(new[k] for k in added), len(added)),
        ("  of which in --files", sum(new[k] for k in own), len(own)),
    ]
    print(f"{'':28} {'test s':>9} {'/ workers':>10} {'tests':>6}")
    for label, seconds, count in rows:
        print(f"{label:28} {seconds:9.1f} {seconds / workers:10.1f} {count:6}")
    grown = rows[1][1] - rows[0][1]
    print(f"{'growth of tests in both':28} {grown:9.1f} {grown / workers:10.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="2", help="pytest-xdist -n (default 2)")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--processes", action="store_true", help="every run_cli a process")
    parser.add_argument("--junit", type=Path, help="read this report instead of running")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--files", nargs="*", default=[], help="--compare: a change's tests")
    parser.add_argument("pytest_args", nargs="*", help="after --: paths and pytest options")
    args = parser.parse_args()
    if args.compare is not None:
        compare(*args.compare, args.files, int(args.workers))
        return 0
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
