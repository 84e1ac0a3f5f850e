"""Which operands of each Pallas kernel XLA places in VMEM, read from the compiled program.

XLA:TPU assigns memory spaces for the whole program: an array a ``pallas_call`` reads from
"HBM" may be one XLA staged in VMEM beforehand (its layout printed with ``S(1)``: a copy
or transpose that writes into VMEM, or a parameter prefetched by async slices), and then
the kernel's block copies of it are VMEM to VMEM: they move no HBM bytes. The cost model
counts every block copy as HBM traffic. This script compiles each validation point for a
v5e without the chip (libtpu, as ``tpu_deviceless.py``) and lists, per kernel, each array
operand and result with its memory space, so what the model counts can be set beside what
the chip's program moves (docs/MODEL.md, tgmm).

    ALLOW_MULTIPLE_LIBTPU_LOAD=1 python benchmarks/tpu_operand_placement.py --out OUT \\
        [--only tgmm,gmm,flash,splash,paged,matmul]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

_DEFINED = re.compile(r"^\s*(?:ROOT )?%(\S+) = (\(?[a-z0-9]+\[[^\]]*\]\{[^}]*\})")
_KERNEL = re.compile(
    r"^\s*(?:ROOT )?%(\S+) = (\S+?\[[^\]]*\]\{[^}]*\}).*?custom-call\((.*?)\), "
    r'custom_call_target="tpu_custom_call"'
)


def placements(hlo: str) -> list[dict[str, Any]]:
    """Each Pallas kernel (``tpu_custom_call``) of a compiled program's entry computation:
    its HLO name, its result and every array operand (rank 2 or more), each with ``vmem``
    true where XLA placed it in VMEM (``S(1)`` in its layout)."""
    entry = hlo[hlo.find("ENTRY") :] if "ENTRY" in hlo else hlo
    defined = {m[1]: m[2] for m in map(_DEFINED.match, entry.splitlines()) if m}
    kernels = []
    for line in entry.splitlines():
        found = _KERNEL.match(line)
        if not found:
            continue
        names = [o.strip().split("*/")[-1].lstrip("%") for o in found[3].split(",")]
        operands = [
            {"array": defined[n], "vmem": "S(1)" in defined[n]}
            for n in names
            if re.search(r"\[\d+,\d+", defined.get(n, ""))
        ]
        result = {"array": found[2], "vmem": "S(1)" in found[2]}
        kernels.append({"kernel": found[1], "result": result, "operands": operands})
    return kernels


def compiled_text(fn: Any, args: tuple[Any, ...], sharding: Any = None) -> str:
    """The optimised HLO of ``fn`` on ``args``: for ``sharding``'s chip (deviceless) when
    given, else for this process's device."""
    import jax

    if sharding is not None:
        args = jax.tree.map(
            lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding), args
        )
    return jax.jit(fn).lower(*args).compile().as_text()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", default="tgmm,gmm,flash,splash,paged,matmul")
    args = parser.parse_args()
    from tpu_deviceless import compiled_for, target
    from tpu_model_validation_families import FAMILIES

    sharding = target("v5e")
    rows = []
    for family in args.only.split(","):
        for name, build in FAMILIES[family].points(False):
            fn, inputs = build()
            kernels = placements(compiled_text(fn, inputs, sharding))
            rows.append({"family": family, "name": name, "kernels": kernels})
            for k in kernels:
                arrays = [f"{'VMEM' if o['vmem'] else 'HBM'} {o['array']}" for o in k["operands"]]
                print(f"{family} {name}: {k['kernel']}: " + "; ".join(arrays), flush=True)
    found = {
        "provenance": {
            "date": time.strftime("%Y-%m-%d"),
            "compiled_for": compiled_for("v5e", sharding),
            "script": Path(__file__).name,
            "command": " ".join(sys.argv),
        },
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "operand_placement.json").write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
