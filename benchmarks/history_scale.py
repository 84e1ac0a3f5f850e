"""`ci-bench history` and `site` over 1,000 to 100,000 history records: time and peak memory.

A generated history (tests/harness/history_data.py's four matmul cases on one device, seeded noise,
a 25 % step every 5,000 commits, a flagged regression every 500) is written as JSON Lines,
10,000 records a file (each file under the reader's 64 MiB limit); each command then runs
as a real process. Figures: wall seconds and the process's peak resident memory
(``resource.getrusage(RUSAGE_CHILDREN)``, one fresh interpreter per measurement).

    python benchmarks/history_scale.py [--sizes 1000,3000,10000,30000,100000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.harness.history_data import sha, story  # noqa: E402

PER_FILE = 10_000
# Wall seconds, CPU seconds (user + system: what the command costs on a machine shared with
# others) and peak resident memory of the command, from a parent that runs nothing else.
PROBE = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
    "s = time.perf_counter() - t\n"
    "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(s, r.ru_utime + r.ru_stime, r.ru_maxrss / 1024, code)\n"
)


def write_history(folder: Path, n: int, seed: int = 3) -> int:
    """``n`` records in ``folder``; returns the bytes written."""
    template = json.loads(story(commits=1).records[0].model_dump_json(exclude_none=True))
    rng = random.Random(seed)
    start = datetime(2020, 1, 1, tzinfo=UTC)
    folder.mkdir(parents=True)
    size = 0
    for first in range(0, n, PER_FILE):
        lines = []
        for i in range(first, min(n, first + PER_FILE)):
            record = json.loads(json.dumps(template))
            record["commit"] = sha(i)
            record["time"] = (start + timedelta(minutes=10 * i)).isoformat()
            step = 1.25 ** ((i // 5000) % 2)
            for point in record["cases"]:
                for key in ("median_ms", "mean_ms", "q1_ms", "q3_ms", "min_ms"):
                    if key in point:
                        point[key] = point[key] * step * (1 + rng.gauss(0, 0.02))
                point.pop("verdict", None)
                if i % 500 == 499:
                    point["verdict"] = "regression"
            lines.append(json.dumps(record, separators=(",", ":")))
        text = "\n".join(lines) + "\n"
        (folder / f"part-{first // PER_FILE:03d}.jsonl").write_text(text)
        size += len(text.encode())
    return size


def measure(argv: list[str], cwd: Path) -> tuple[float, float, float, int]:
    """(wall s, CPU s, peak MiB, exit code) of one ci-bench process."""
    cli = [sys.executable, "-m", "ci_bench.commands.cli", *argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *cli], cwd=cwd, env=env, capture_output=True, text=True
    )
    wall, cpu, peak, code = done.stdout.split()
    return float(wall), float(cpu), float(peak), int(code)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,3000,10000,30000,100000")
    args = parser.parse_args()
    print(f"{'records':>8} {'MB':>6}  {'command':8} {'wall s':>7} {'CPU s':>6} {'peak MiB':>8}")
    for n in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            size = write_history(work / "h", n) / 1e6
            base = ["--history", "h", "--no-baselines"]
            for label, argv in (("history", ["history", *base]), ("site", ["site", *base])):
                if label == "site":
                    argv += ["--out", "site"]
                wall, cpu, peak, code = measure(argv, work)
                flag = "" if code == 0 else f"  exit {code}"
                print(
                    f"{n:>8} {size:>6.1f}  {label:8} {wall:>7.1f} {cpu:>6.1f} {peak:>8.0f}{flag}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
