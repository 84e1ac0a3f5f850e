"""``tpu_vmem_probe.py --render``: the model's VMEM count beside the VMEM Mosaic allocated.

For each (size, dtype) probed on the chip, ``ci-bench tune --chip v5e`` (the model alone, on
this machine) counts every tiling's VMEM; each probed tiling's row sets the two side by
side, with the accumulator's size (``bm·bn`` float32: the dot result Mosaic keeps while it
adds it in) to read what the count leaves out. The summary says how many tilings the model
places on the right side of v5e's 16 MiB scoped default, and the largest miss.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tabulate import tabulate

MIB = 1 << 20
LIMIT_MIB = 16.0


def modelled_vmem(size: int, dtype: str) -> dict[tuple[int, int, int], float]:
    """The model's VMEM count (MiB) per effective program at this size and dtype."""
    from tpu_matmul_sweep_report import model_candidates

    from kernels.matmul import BlockSizes

    counts: dict[tuple[int, int, int], float] = {}
    for cand in model_candidates(size, dtype):
        e = BlockSizes(**cand["config"]).within(size, size, size)
        counts[(e.block_m, e.block_k, e.block_n)] = cand["vmem_bytes"] / MIB
    return counts


def rows_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    from kernels.matmul import BlockSizes

    models: dict[tuple[int, str], dict[tuple[int, int, int], float]] = {}
    rows = []
    for probed in record["rows"]:
        below_start = probed.get("needs_mib") is None and not probed.get("message")
        if probed.get("needs_mib") is None and not below_start:
            continue  # refused for another reason: nothing to set the count beside
        size, dtype = probed["size"], probed["dtype"]
        if (size, dtype) not in models:
            models[(size, dtype)] = modelled_vmem(size, dtype)
        e = BlockSizes(*probed["tiles"]).within(size, size, size)
        program = (e.block_m, e.block_k, e.block_n)
        model = models[(size, dtype)][program]
        # Compiled under the 1 MiB the probe starts from: the need is under that.
        need = 1.0 if below_start else probed["needs_mib"]
        rows.append(
            {
                "size": size,
                "dtype": dtype,
                "program": program,
                "k_steps": size // e.block_k,
                "acc_mib": e.block_m * e.block_n * 4 / MIB,
                "model_mib": model,
                "mosaic_mib": need,
                "missing_mib": need - model,
                "agrees": (model < LIMIT_MIB) == (need <= LIMIT_MIB),  # the model: strictly under
                "checked": True if below_start else probed.get("refused_below"),
                "under_1mib": below_start,
            }
        )
    return rows


def render(path: Path) -> int:
    record = json.loads(path.read_text())
    rows = rows_of(record)
    table = [
        [
            f"{r['size']}³",
            r["dtype"],
            r["program"],
            r["k_steps"],
            r["acc_mib"],
            round(r["model_mib"], 2),
            "< 1" if r["under_1mib"] else r["mosaic_mib"],
            "" if r["under_1mib"] else round(r["missing_mib"], 2),
            "yes" if r["agrees"] else "NO",
        ]
        for r in rows
    ]
    headers = ["size", "dtype", "(bm, bk, bn)", "k steps", "acc MiB", "model MiB", "Mosaic MiB"]
    print(tabulate(table, headers=[*headers, "missing MiB", "same side of 16 MiB"]))
    unchecked = [r["program"] for r in rows if not r["checked"]]
    wrong = [r for r in rows if not r["agrees"]]
    named = [r for r in rows if not r["under_1mib"]]
    worst = max(named, key=lambda r: abs(r["missing_mib"]))
    low, high = (f(r["missing_mib"] for r in named) for f in (min, max))
    print(
        f"\n{len(rows) - len(wrong)}/{len(rows)} on the same side of {LIMIT_MIB:g} MiB as Mosaic"
        f" ({len(rows) - len(named)} compiled under 1 MiB); misses from"
        f" {low:+.2f} to {high:+.2f} MiB (need - count);"
        f" largest miss {worst['missing_mib']:+.2f} MiB at {worst['program']} {worst['dtype']}"
        f" {worst['size']}³; figures not confirmed both ways: {unchecked or 'none'}"
    )
    return 0


PROBED = ("fits_16mib", "named_mib", "needs_mib", "refused_below")


def agreement(path: Path, against: Path) -> int:
    """Two probes of the same tilings (the chip's, and a deviceless compile's) side by side:
    how many rows agree on every figure the probe reads, and each that does not. Against a
    sweep (``tpu_matmul_sweep.py``'s file: which programs compiled on the chip), whether
    each program fits the default limit in both."""
    if "sweeps" in json.loads(against.read_text()):
        return _against_sweep(path, against)

    def keyed(p: Path) -> dict[tuple[Any, ...], dict[str, Any]]:
        record = json.loads(p.read_text())
        return {(r["size"], r["dtype"], tuple(r["tiles"])): r for r in record["rows"]}

    mine, theirs = keyed(path), keyed(against)
    shared = [k for k in mine if k in theirs]
    differ = [k for k in shared if any(mine[k].get(f) != theirs[k].get(f) for f in PROBED)]
    for k in differ:
        print(k, {f: (mine[k].get(f), theirs[k].get(f)) for f in PROBED})
    print(f"{len(shared) - len(differ)}/{len(shared)} tilings probed in both agree on "
          f"{', '.join(PROBED)} ({len(mine)} and {len(theirs)} probed)")  # fmt: skip
    return 0 if not differ else 1


def _against_sweep(path: Path, sweep_path: Path) -> int:
    from kernels.matmul import BlockSizes

    fits: dict[tuple[Any, ...], bool] = {}
    for r in json.loads(path.read_text())["rows"]:
        e = BlockSizes(*r["tiles"]).within(r["size"], r["size"], r["size"])
        fits[(r["size"], r["dtype"], (e.block_m, e.block_k, e.block_n))] = r["fits_16mib"]
    shared = differ = 0
    for sweep in json.loads(sweep_path.read_text())["sweeps"]:
        for program in sweep["programs"]:
            key = (sweep["size"], sweep["dtype"], tuple(program["program"]))
            if key in fits:
                shared += 1
                if fits[key] != program["compiles"]:
                    differ += 1
                    print(key, "probe:", fits[key], "sweep:", program["compiles"])
    print(f"{shared - differ}/{shared} programs compiled in both agree on fitting "
          f"{LIMIT_MIB:g} MiB ({len(fits)} probed)")  # fmt: skip
    return 0 if not differ else 1
