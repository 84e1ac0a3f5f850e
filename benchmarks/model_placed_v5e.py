"""What the cost model would read if it knew which operands XLA places in VMEM (an estimate).

``tpu_operand_placement.py`` found, in the compiled v5e programs of the validation set, that
XLA keeps megablox tgmm's two inputs in VMEM on five of its six points, so the kernel's
block copies of them move no HBM bytes, while the model, reading the kernel from its jaxpr,
counts every one. This script models each point of the families that have such operands
twice, as ``model_calibration_v5e.py --layouts libtpu`` does (libtpu's v5e layouts), once
as the model stands and once with the block copies of each placed input counted as moving
nothing (``pipeline.traffic`` patched for the inputs whose dtype and shape the compiled
program shows in VMEM), and sets both beside the chip's stored times. It is an estimate of
a revision not made: the XLA operations around the kernel are counted as they are (for
tgmm: its transpose, 16 MiB read and 16 MiB written, where the program reads both inputs
once, 32 MiB, and writes the transposed one to VMEM), and nothing here is fitted.

    ALLOW_MULTIPLE_LIBTPU_LOAD=1 python benchmarks/model_placed_v5e.py [--families tgmm,flash]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

PLACEMENT = HERE / "data" / "tpu_v5e_operand_placement_deviceless_2026-12-08.json"
MEASURED = HERE / "data" / "tpu_v5e_model_rev10_2026-12-07.json"
_ARRAY = re.compile(r"^([a-z0-9]+)\[([\d,]*)\]")
_DTYPES = {"bf16": "bfloat16", "f32": "float32", "f16": "float16", "s8": "int8", "s32": "int32"}


def placed_inputs(kernels: list[dict[str, Any]]) -> set[tuple[str, tuple[int, ...]]]:
    """(dtype, shape) of every kernel operand the compiled program keeps in VMEM."""
    found = set()
    for kernel in kernels:
        for operand in kernel["operands"]:
            match = _ARRAY.match(operand["array"])
            if operand["vmem"] and match:
                dims = tuple(int(d) for d in match[2].split(",") if d)
                found.add((_DTYPES.get(match[1], match[1]), dims))
    return found


@contextlib.contextmanager
def inputs_in_vmem(placed: set[tuple[str, tuple[int, ...]]]) -> Iterator[None]:
    """The model's pipeline counting no HBM bytes for the block copies of ``placed`` inputs
    (their copies still counted, at no bytes), wherever it is imported by name."""
    from ci_bench.measure.model import case, pipeline

    original = pipeline.traffic

    def traffic(op: Any, order: Any) -> Any:
        moved = original(op, order)
        if op.role == "input" and (op.dtype, tuple(op.shape)) in placed:
            return pipeline.Traffic(moved.copies, moved.fetch * 0, moved.write)
        return moved

    for module in (pipeline, case):
        module.traffic = traffic  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module in (pipeline, case):
            module.traffic = original  # type: ignore[attr-defined]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default="tgmm,flash")
    args = parser.parse_args()
    from model_calibration_v5e import builds, use_layouts
    from tpu_model_validation import spearman

    use_layouts("libtpu")
    placement = {
        (r["family"], r["name"]): r["kernels"] for r in json.loads(PLACEMENT.read_text())["rows"]
    }
    measured = {
        (p["family"], p["name"]): p["measured_us"]
        for p in json.loads(MEASURED.read_text())["points"]
    }
    for family in args.families.split(","):
        ratios: dict[str, list[float]] = {"as it stands": [], "inputs placed": []}
        chip_times: list[float] = []
        for name, build in builds(family).items():
            chip_us = measured.get((family, name))
            if not chip_us:
                continue
            placed = placed_inputs(placement.get((family, name), []))
            model = build()
            now = model()["modelled_us"]
            with inputs_in_vmem(placed):
                then = model()["modelled_us"]
            chip_times.append(chip_us)
            ratios["as it stands"].append(now / chip_us)
            ratios["inputs placed"].append(then / chip_us)
            inputs = ", ".join(f"{d}{list(s)}" for d, s in sorted(placed)) or "none"
            line = f"{family} {name}: chip {chip_us:.1f} µs, model {now:.1f} ({now / chip_us:.3f})"
            print(
                f"{line}, placed {then:.1f} ({then / chip_us:.3f}); in VMEM: {inputs}", flush=True
            )
        for what, values in ratios.items():
            within = sum(abs(v - 1) <= 0.25 for v in values)
            spread = f"{min(values):.3f}-{max(values):.3f}"
            median = f"median {statistics.median(values):.3f}"
            rho = spearman([v * t for v, t in zip(values, chip_times, strict=True)], chip_times)
            print(f"{family}, {what}: {median}, {spread}, {within}/{len(values)} within ±25 %, "
                  f"Spearman {rho:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
