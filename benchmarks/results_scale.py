"""Peak memory and time of `compare`, `merge` and `promote` over results files of 1,000 to
20,000 cases (59 MB), against the file's size.

Each file holds N matmul cases of tests/harness/factories.py (20 samples each, as a run with 20
repeats writes them); `compare` reads it against a baseline promoted from the same file.
Each command runs as a real process; figures: wall and CPU seconds, the process's peak
resident memory (``resource.getrusage(RUSAGE_CHILDREN)``, a fresh interpreter per
measurement), and that peak less the same command's on a 1-case file, per MB of file. At
20,000 cases the baseline would be over the reader's 64 MiB limit: `promote` refuses it (exit 2) and
`compare` has no baseline to read.

    python benchmarks/results_scale.py [--sizes 1000,3000,10000,20000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.history_scale import measure  # noqa: E402
from ci_bench.store.files import dump_model  # noqa: E402
from tests.harness.factories import case, results  # noqa: E402


def write_results(path: Path, n: int) -> int:
    cases = [case(f"matmul/B{i + 1}-M128-K128-N128/float32", 1.0 + i % 7 / 100) for i in range(n)]
    text = dump_model(results(cases))
    path.write_text(text)
    return len(text.encode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,3000,10000,15000,20000")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "pyproject.toml").write_text('[tool.ci-bench]\nkernels = ["kernels.matmul"]\n')
        write_results(work / "one.json", 1)
        # Each command's own idle peak (a 1-case file): compare imports more than merge.
        idle = {
            "promote": measure(["promote", "one.json", "--baselines-dir", "b1"], work)[2],
            "compare": measure(["compare", "one.json", "--baselines-dir", "b1"], work)[2],
            "merge": measure(["merge", "one.json", "-o", "one-merged.json"], work)[2],
        }
        print("idle peaks (1-case file): " + ", ".join(f"{k} {v:.0f} MiB" for k, v in idle.items()))
        print(
            f"{'cases':>6} {'MB':>6}  {'command':8} {'wall s':>7} {'CPU s':>6} {'peak MiB':>8} "
            f"{'(peak-idle)/MB':>14}"
        )
        for n in (int(s) for s in args.sizes.split(",")):
            name = f"r{n}.json"
            size = write_results(work / name, n) / 1e6
            runs = [
                ("promote", ["promote", name, "--baselines-dir", f"b{n}"]),
                ("compare", ["compare", name, "--baselines-dir", f"b{n}", "--format", "json"]),
                ("merge", ["merge", name, "-o", f"m{n}.json"]),
            ]
            for label, argv in runs:
                wall, cpu, peak, code = measure(argv, work)
                flag = "" if code in (0, 1) else f"  exit {code}"
                print(
                    f"{n:>6} {size:>6.1f}  {label:8} {wall:>7.1f} {cpu:>6.1f} {peak:>8.0f} "
                    f"{(peak - idle[label]) / size:>14.1f}{flag}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
