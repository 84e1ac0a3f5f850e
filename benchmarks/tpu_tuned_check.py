"""Does every entry of a shipped tuned file compile on its chip? Checked without the chip.

A ``.tuned.<chip>.json`` beside the baselines picks the tiles the project's matmul runs with
on that chip, forward and backward (``kernels.matmul.pallas``). An entry the chip's compiler
refuses would fail every pull request on that runner, so each case of the file is compiled
here as the kernel runs it there: the subject traced as on the chip (its tuned file read
for that chip, the fused backward's VMEM budget of that chip), lowered with inputs placed on
the chip's topology and compiled by libtpu (``tpu_deviceless.py``). Nothing runs.

    python benchmarks/tpu_tuned_check.py baselines/matmul_v0.8.0.tuned.v5e.json

Prints one row per case and exits 1 when any refuses.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):  # the repository (kernels, ci_bench), benchmarks
    if _path not in sys.path:
        sys.path.insert(0, _path)


def _as_chip(chip: str, directory: Path) -> None:
    """The subject reads its tuned file and VMEM budget for the chip it runs on: here, the
    chip the file is for (this host has none), and the file from the folder it is in."""
    import kernels.matmul
    from ci_bench.measure import chip as chips

    chips.this_chip = lambda: chip
    kernels.matmul.BASELINES = directory


def check(entry: dict[str, Any], target: Any) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    from tpu_vmem_probe import compile_message

    from kernels.matmul import pallas

    p, dtype = entry["params"], jnp.dtype(entry["dtype"])
    shapes = [
        jax.ShapeDtypeStruct((p["B"], p["M"], p["K"]), dtype, sharding=target),
        jax.ShapeDtypeStruct((p["B"], p["K"], p["N"]), dtype, sharding=target),
    ]
    if entry["mode"] == "forward":
        fn = pallas
    else:
        shapes.append(jax.ShapeDtypeStruct((p["B"], p["M"], p["N"]), dtype, sharding=target))

        def fn(a: jax.Array, b: jax.Array, g: jax.Array) -> tuple[jax.Array, jax.Array]:
            return jax.vjp(pallas, a, b)[1](g)

    began = time.monotonic()
    message = compile_message(fn, shapes, None)
    row = {"mode": entry["mode"], "config": entry["config"], "compiles": message is None}
    if message is not None:
        row["message"] = message[-300:]
    row["seconds"] = round(time.monotonic() - began, 1)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tuned", type=Path, help="a .tuned.<chip>.json")
    parser.add_argument("--json", type=Path, help="write the rows here too")
    opts = parser.parse_args()
    tuned = json.loads(opts.tuned.read_text())
    if tuned.get("kernel") != "matmul":
        parser.error("only the project's matmul reads its tuned file this way")
    expected = f"matmul_v{tuned['version']}.tuned.{tuned['chip']}.json"
    if opts.tuned.name != expected:  # the kernel finds its file by this name
        parser.error(f"{opts.tuned.name}: the kernel reads {expected} (rename it)")
    import tpu_deviceless

    target = tpu_deviceless.target(tuned["chip"])
    _as_chip(tuned["chip"], opts.tuned.resolve().parent)
    rows = []
    for case_id, entry in tuned["cases"].items():
        row = {"case": case_id, **check(entry, target)}
        rows.append(row)
        tiles = "x".join(str(v) for v in row["config"].values())
        verdict = "compiles" if row["compiles"] else "REFUSED: " + row["message"]
        print(f"{case_id:48} {row['mode']:8} {tiles:16} {verdict}", flush=True)
    refused = [r for r in rows if not r["compiles"]]
    print(f"{len(rows) - len(refused)}/{len(rows)} entries compile for {tuned['chip']}")
    if opts.json:
        record = {"tuned": str(opts.tuned), "compiled_for": tpu_deviceless.compiled_for(
            tuned["chip"], target), "rows": rows}  # fmt: skip
        opts.json.write_text(json.dumps(record, indent=1))
    return 1 if refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
