"""What a whole-array VMEM operand costs a ``pallas_call``'s scoped VMEM (issue 51).

The cost model counts a ``pl.no_block_spec`` operand (the whole array in VMEM) once, at full
size, never double-buffered. A public GLA (its chunk-local cumsum) compiles where that count
says it cannot. This microbenchmark, our own call and not that kernel, shows why: the scoped
need of one whole-array call depends on where XLA puts its buffers, which the ops *around*
the call decide. A 32 MiB float32 array goes in and out of a trivial kernel (grid or none,
aliased or not); each variant is compiled by libtpu for a v5e with the call's
``vmem_limit_bytes`` lowered until it refuses, and the refusals' "Scoped allocation with
size" words give the need. Nothing runs: a host with libtpu installed compiles deviceless
(``tpu_deviceless.py``), a TPU host against its own chip.

    ALLOW_MULTIPLE_LIBTPU_LOAD=1 python benchmarks/tpu_vmem_whole_array.py --out OUT

Its run of 2026-12-07 (deviceless v5e, libtpu 0.0.42.1):
benchmarks/data/tpu_v5e_vmem_whole_array_deviceless_2026-12-07.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

MIB = 1 << 20
USED = re.compile(
    r'used_scoped_memory_configs":\[\{"memory_space":"1",'
    r'"offset":"(\d+)","size":"(\d+)"'
)
ROWS = 128  # rows a grid step touches
# Where the call's input comes from and its output goes: a jit argument / result, or an XLA op.
WIRINGS = {
    "argument -> result": lambda call: call,
    "argument -> XLA op": lambda call: lambda x: call(x) + 1,
    "XLA op -> result": lambda call: lambda x: call(x + 1),
    "XLA op -> XLA op": lambda call: lambda x: call(x + 1) + 1,
}


def whole_array_call(shape: tuple[int, ...], limit: int, grid: bool, alias: bool) -> Callable:
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def per_step(s_ref, o_ref):
        t, b = pl.program_id(0), pl.program_id(1)
        rows = pl.ds(t * ROWS, ROWS)
        o_ref[b, rows, :] = s_ref[b, rows, :] * 2

    def once(s_ref, o_ref):
        o_ref[0, pl.ds(0, ROWS), :] = s_ref[0, pl.ds(0, ROWS), :] * 2

    return pl.pallas_call(
        per_step if grid else once,
        grid=(shape[1] // ROWS, shape[0]) if grid else (),
        in_specs=pl.no_block_spec,
        out_specs=pl.no_block_spec,
        out_shape=jax.ShapeDtypeStruct(shape, jnp.float32),
        input_output_aliases={0: 0} if alias else {},
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=limit),
    )


def scoped_need(make: Callable[[int], Callable], shape: tuple[int, ...], target: Any) -> dict:
    """The smallest limit (1/16 MiB steps) the program compiles at, from 1 MiB up, and the
    sizes each refusal named on the way (``tpu_vmem_probe.search_need``)."""
    import jax
    import jax.numpy as jnp
    from tpu_vmem_probe import compile_message, search_need

    arg = jax.ShapeDtypeStruct(shape, jnp.float32, sharding=target)
    found = search_need(lambda limit: compile_message(make(limit), [arg], None), 1 / 16)
    row = {"refusals_mib": found["named_mib"]}
    if "compiles_at_mib" in found:
        return {"compiles_at_mib": found["compiles_at_mib"]} | row
    return {"error": found.get("message", "no limit found in 16 tries")[-400:]} | row


def used_at(shape: tuple[int, ...], limit_mib: int, target: Any) -> dict:
    """The op -> op call compiled at a fixed limit: the scoped VMEM the compiled call says it
    uses (its custom call's ``used_scoped_memory_configs``: offset, size) and whether XLA
    placed a buffer in VMEM (an ``S(1)`` layout in the program)."""
    import jax
    import jax.numpy as jnp

    fn = WIRINGS["XLA op -> XLA op"](whole_array_call(shape, limit_mib * MIB, True, False))
    arg = jax.ShapeDtypeStruct(shape, jnp.float32, sharding=target)
    text = jax.jit(fn).lower(arg).compile().as_text()
    calls = [line for line in text.splitlines() if "custom_call_target" in line]
    used = [(int(o) / MIB, int(n) / MIB) for line in calls for o, n in USED.findall(line)]
    row = {"wiring": "XLA op -> XLA op", "fixed_limit_mib": limit_mib, "mib_each": 32}
    return row | {"used_scoped_offset_and_mib": used, "placed_in_vmem_S1": "S(1)" in text}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--chip", default="v5e")
    opts = parser.parse_args()
    from tpu_deviceless import target
    from tpu_microbench import provenance

    where = target(opts.chip)
    shape = (16, 4096, 128)  # 32 MiB of float32
    rows = []
    for grid in (True, False):
        for alias in (False, True):
            for wiring, wire in WIRINGS.items():

                def make(limit, wire=wire, grid=grid, alias=alias):
                    return wire(whole_array_call(shape, limit, grid, alias))

                row = {"wiring": wiring, "grid": grid, "alias": alias, "mib_each": 32}
                row |= scoped_need(make, shape, where)
                rows.append(row)
                print(json.dumps(row), flush=True)
    for limit_mib in (40, 100):  # the same op -> op call at a limit above its buffers
        rows.append(used_at(shape, limit_mib, where))
        print(json.dumps(rows[-1]), flush=True)
    opts.out.mkdir(parents=True, exist_ok=True)
    import importlib.metadata

    made = {"script": "benchmarks/tpu_vmem_whole_array.py", "deviceless": opts.chip}
    made["libtpu"] = importlib.metadata.version("libtpu")
    data = {"provenance": provenance() | made, "rows": rows}
    (opts.out / "vmem_whole_array.json").write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
