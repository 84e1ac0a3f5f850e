"""How reading a results file scales with its number of cases (the duplicate-id check).

A file of N copies of one small error case is read through ci-bench's reader (parse +
validation, as ``compare`` and ``merge`` do); it is refused for its duplicates. Linear
validation keeps the time per case flat as N grows; the old ``ids.count`` check was
quadratic (60,000 cases: past a minute). Prints seconds and microseconds per case.

    python benchmarks/duplicate_ids.py [--sizes 1000,10000,60000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ci_bench.errors import InputError
from ci_bench.schema import RESULTS_READABLE, Results
from ci_bench.store.files import dump_model, read_model
from tests.harness.factories import case, results


def duplicated(n: int) -> str:
    doc = json.loads(dump_model(results([case()])))
    one = doc["cases"][0]
    small = {k: one[k] for k in ("id", "kernel", "version", "params", "shape", "dtype")}
    small.update(status="error", error="x")
    doc["cases"] = [small] * n
    return json.dumps(doc)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,60000")
    args = parser.parse_args()
    print(f"{'cases':>8} {'MB':>6} {'seconds':>8} {'us/case':>8}  outcome")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "dups.json"
        for n in (int(x) for x in args.sizes.split(",")):
            path.write_text(duplicated(n))
            started = time.perf_counter()
            try:
                read_model(path, Results, what="results", schema_version=RESULTS_READABLE)
                outcome = "read (no duplicate check?)"
            except InputError as exc:
                outcome = str(exc).split(": ", 1)[1][:60]
            seconds = time.perf_counter() - started
            size = path.stat().st_size / 1e6
            print(f"{n:8d} {size:6.1f} {seconds:8.3f} {seconds / n * 1e6:8.1f}  {outcome}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
