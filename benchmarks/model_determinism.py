"""Is a tiling-only pull request flagged on every run, and identical code never?

    python benchmarks/model_determinism.py --trials 20

Each trial is a fresh process (fresh jax, whatever load the machine is under) that models
the project's matmul ``ci`` profile three times: the base tiling BlockSizes(128, 128, 128),
the "pull request" BlockSizes(64, 128, 128) (the only change: smaller blocks), and the base
again (identical code, A/A), and judges head against base with the structural verdict's rule
(``ci_bench.judge.model.judge_model``, threshold 5 % on every chip). Prints how many trials
flagged the PR, how many flagged identical code, and whether every trial read the same
bytes, steps and modelled times.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import subprocess
import sys
import time

CHIPS = ("v4", "v5e", "v5p", "v6e", "7x")


def one_trial() -> dict:
    from ci_bench.judge.model import judge_model
    from ci_bench.measure.model import analyze_case
    from ci_bench.schema import Thresholds
    from kernels.matmul import SPEC, BlockSizes, matmul_tiled

    def spec(bm: int):
        blocks = BlockSizes(block_m=bm, block_k=128, block_n=128)
        return dataclasses.replace(SPEC, pallas=functools.partial(matmul_tiled, block_sizes=blocks))

    base, head = spec(128), spec(64)
    t = Thresholds()
    flagged = false_alarms = 0
    figures = []
    start = time.perf_counter()
    for case in SPEC.cases("ci"):
        b = analyze_case(base, case, CHIPS)
        h = analyze_case(head, case, CHIPS)
        again = analyze_case(base, case, CHIPS)
        pr = judge_model(h, b, CHIPS, t)
        aa = judge_model(again, b, CHIPS, t)
        flagged += pr is not None and pr.verdict == "structural"
        false_alarms += aa is not None and aa.verdict != "pass"
        for m in (b, h):
            figures.append(
                [case.id, m.hbm_bytes, m.grid_steps, m.vmem_bytes]
                + [round(m.chips[c].modelled_us, 9) for c in CHIPS]
            )
    digest = hashlib.sha256(json.dumps(figures).encode()).hexdigest()[:16]
    return {
        "cases": len(SPEC.cases("ci")),
        "flagged": flagged,
        "false_alarms": false_alarms,
        "digest": digest,
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--one-trial", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_trial:
        print(json.dumps(one_trial()))
        return
    trials = []
    for index in range(args.trials):
        done = subprocess.run(
            [sys.executable, __file__, "--one-trial"],
            capture_output=True,
            text=True,
            check=True,
        )
        trials.append(json.loads(done.stdout.strip().splitlines()[-1]))
        t = trials[-1]
        print(
            f"trial {index + 1:2d}: PR flagged on {t['flagged']}/{t['cases']} cases, identical "
            f"code flagged on {t['false_alarms']}/{t['cases']}, figures {t['digest']}, "
            f"{t['seconds']:.1f} s"
        )
    pr_runs = sum(t["flagged"] > 0 for t in trials)
    aa_runs = sum(t["false_alarms"] > 0 for t in trials)
    same = len({t["digest"] for t in trials}) == 1
    print(
        f"\ntiling-only PR flagged in {pr_runs}/{len(trials)} runs "
        f"(every case: {sum(t['flagged'] == t['cases'] for t in trials)}/{len(trials)}); "
        f"identical code flagged in {aa_runs}/{len(trials)} runs; "
        f"bytes, steps and modelled times identical across runs: {'yes' if same else 'NO'}"
    )


if __name__ == "__main__":
    main()
