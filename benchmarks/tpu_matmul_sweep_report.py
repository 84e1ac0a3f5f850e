"""``tpu_matmul_sweep.py --render``: the cost model against a chip's full matmul sweep.

For each forward (size, dtype) swept, ``ci-bench tune --chip v5e`` (the model alone, on this
machine) ranks the same 125 tilings; this module sets each beside the chip's figures:

- VMEM fit: the model's ``fits`` against whether the chip's compiler took the tiling (a
  false fit: the model says it fits and the compiler refuses; a false misfit: the reverse);
- the pick: the model's best (its ties: the worst measured of them, the pick a user would
  get from the model alone at worst) and ``tune --measure K``'s (the measured best of the
  model's top K and their ties), each against the chip's best tiling;
- Spearman's rank correlation of modelled and measured time, and the median model/measured,
  over the programs both rank.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

MEASURE_K = 4  # what docs/TUNE.md and the chip runs use: tune --measure 4
ENTRY = "import sys; from ci_bench.commands.entry import main; sys.exit(main())"


def model_candidates(size: int, dtype: str) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "tune.json"
        command = [sys.executable, "-c", ENTRY, "tune", "--kernel", "matmul"]
        command += ["--shape", f"{size},{size},{size}", "--dtype", dtype, "--chip", "v5e"]
        command += ["--format", "json", "-o", str(out), "-q"]
        subprocess.run(command, check=True, capture_output=True)
        (case,) = json.loads(out.read_text())["cases"]
    return case["candidates"]


def compare(sweep: dict[str, Any]) -> dict[str, Any]:
    from tpu_model_validation import spearman

    from kernels.matmul import BlockSizes

    size, dtype = sweep["size"], sweep["dtype"]
    by_program = {tuple(p["program"]): p for p in sweep["programs"]}
    rows = []
    for cand in model_candidates(size, dtype):
        tile = BlockSizes(**cand["config"])
        e = tile.within(size, size, size)
        chip = by_program[(e.block_m, e.block_k, e.block_n)]
        v5e = cand["chips"]["v5e"]
        rows.append(
            {
                "tiling": (tile.block_m, tile.block_k, tile.block_n),
                "fits": bool(v5e["fits"]),
                "compiles": chip["compiles"],
                "modelled_us": v5e["modelled_us"],
                "rank": v5e["rank"],
                "measured_us": chip.get("median_us"),
            }
        )
    timed = [r for r in rows if r["measured_us"] is not None]
    best = min(r["measured_us"] for r in timed)
    ranked = sorted((r for r in rows if r["rank"] is not None), key=lambda r: r["rank"])
    top_rank = ranked[0]["rank"]
    model_pick = max(r["measured_us"] or float("inf") for r in ranked if r["rank"] == top_rank)
    kth = ranked[min(MEASURE_K, len(ranked)) - 1]["rank"]
    shortlist = [r["measured_us"] for r in ranked if r["rank"] <= kth and r["measured_us"]]
    both = [r for r in timed if r["rank"] is not None]
    return {
        "size": size,
        "dtype": dtype,
        "tilings": len(rows),
        "false_fit": [r["tiling"] for r in rows if r["fits"] and not r["compiles"]],
        "false_misfit": [r["tiling"] for r in rows if not r["fits"] and r["compiles"]],
        "chip_best_us": best,
        "xla_us": sweep["xla_us"],
        "model_pick_vs_best": model_pick / best,
        "measure_pick_vs_best": min(shortlist) / best,
        "spearman": spearman([r["modelled_us"] for r in both], [r["measured_us"] for r in both]),
        "median_ratio": statistics.median(r["modelled_us"] / r["measured_us"] for r in both),
        "within_25": sum(abs(r["modelled_us"] / r["measured_us"] - 1) <= 0.25 for r in both),
        "ranked_and_timed": len(both),
    }


def render(paths: list[Path]) -> int:
    from tabulate import tabulate

    results = []
    for path in paths:
        found = json.loads(path.read_text())
        for sweep in found["sweeps"]:
            if (
                sweep.get("product", "nn") == "nn"
                and sweep.get("batch", 1) == 1
                and "programs" in sweep
            ):
                results.append(compare(sweep))
    headers = ["size", "dtype", "tilings", "false fit", "false misfit", "chip best µs"]
    headers += ["XLA µs", "model pick / best", f"--measure {MEASURE_K} / best", "Spearman"]
    headers += ["median model/measured", "within ±25 %"]
    table = [
        [
            f"{r['size']}³",
            r["dtype"],
            r["tilings"],
            len(r["false_fit"]),
            len(r["false_misfit"]),
            f"{r['chip_best_us']:.1f}",
            f"{r['xla_us']:.1f}",
            f"{r['model_pick_vs_best']:.3f}",
            f"{r['measure_pick_vs_best']:.3f}",
            f"{r['spearman']:.2f}" if r["spearman"] is not None else "–",
            f"{r['median_ratio']:.3f}",
            f"{r['within_25']}/{r['ranked_and_timed']}",
        ]
        for r in results
    ]
    print(tabulate(table, headers=headers, tablefmt="github"))
    for r in results:
        for kind in ("false_fit", "false_misfit"):
            if r[kind]:
                print(f"{r['size']}³ {r['dtype']} {kind.replace('_', ' ')}: {r[kind]}")
    return 0
