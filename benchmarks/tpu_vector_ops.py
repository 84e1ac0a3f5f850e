"""What the TPU compiler issues for one vector operation, beside the cost model's count.

The model prices a kernel body's element-wise, transcendental and cross-lane work from a
table of VALU operations and EUP pushes per vreg (``ci_bench.measure.model.vector``), written
from jax's and Mosaic's sources, never checked against the compiler. This microbenchmark
checks it: each kernel here does one operation on a (256, 512) block (128 float32 vregs, 64
packed bfloat16 ones), ``o_ref[...] = op(x_ref[...])``, one grid step, compiled by libtpu
for a v5e (deviceless, ``tpu_deviceless.py``; on a v5e host the same program compiles for
its chip). The final bundles (``--xla_jf_dump_to``, read as in ``tpu_static_schedule.py``)
give each unit's filled slots; a bare copy's slots are subtracted, so a row is what the
operation adds, per float32-sized vreg of its block (128), beside the model's VALU and EUP
count for the same call (at the revision the JSON records). Nothing is timed: slots are the
compiler's choice of instructions, and bundles (the issue length) include the loads and
stores every row shares.

A second table compiles one dot per (m, k, n) into float32: the MXU's result for each 128 of
k is popped (``VPOP``) and summed on the VALU, which the model counts since revision 10.

These are chip microbenchmarks in the sense of issue 51 (one operation, no kernel the model
is judged on): model revision 10's vector table (``ci_bench/measure/model/vector.py``) is
read from them; this script changes nothing.

    ALLOW_MULTIPLE_LIBTPU_LOAD=1 python benchmarks/tpu_vector_ops.py --out OUT [--chip v6e]
    python benchmarks/tpu_vector_ops.py --render OUT/vector_ops.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):  # the repository (ci_bench), benchmarks
    if _path not in sys.path:
        sys.path.insert(0, _path)

ROWS, COLS = 256, 512
WIDE_VREGS = ROWS * COLS // 1024  # float32 vregs of the block: the rows' unit
UNITS = ("VALU", "EUP", "XLU", "VPOP", "VLOAD", "VSTORE")
F32, BF16 = "float32", "bfloat16"


def operations() -> dict[str, tuple[Callable[..., Any], int, str | None]]:
    """Each operation: its body on the loaded block(s), how many operands, and the result's
    dtype where it is not the operand's."""
    import jax
    import jax.numpy as jnp

    def iota(x: Any) -> Any:
        return x + jax.lax.broadcasted_iota(jnp.int32, x.shape, 0).astype(x.dtype)

    return {
        "copy": (lambda x: x, 1, None),
        "add": (lambda x, y: x + y, 2, None),
        "mul": (lambda x, y: x * y, 2, None),
        "fma (x * y + z)": (lambda x, y, z: x * y + z, 3, None),
        "max": (jnp.maximum, 2, None),
        "select (x > y)": (lambda x, y: jnp.where(x > y, x, y), 2, None),
        "div": (lambda x, y: x / y, 2, None),
        "exp": (jnp.exp, 1, None),
        "exp2": (jnp.exp2, 1, None),
        "log": (jnp.log, 1, None),
        "sqrt": (jnp.sqrt, 1, None),
        "tanh": (jnp.tanh, 1, None),
        "logistic": (jax.nn.sigmoid, 1, None),
        "rsqrt": (jax.lax.rsqrt, 1, None),
        "sum over lanes": (lambda x: jnp.broadcast_to(x.sum(-1, keepdims=True), x.shape), 1, None),
        "max over lanes": (lambda x: jnp.broadcast_to(x.max(-1, keepdims=True), x.shape), 1, None),
        "sum over rows": (lambda x: jnp.broadcast_to(x.sum(0, keepdims=True), x.shape), 1, None),
        "broadcast a column": (lambda x: jnp.broadcast_to(x[:, :1], x.shape), 1, None),
        "broadcast a row": (lambda x: jnp.broadcast_to(x[:1, :], x.shape), 1, None),
        "iota + add": (iota, 1, None),
        "to float32": (lambda x: x.astype(jnp.float32), 1, F32),
        "to bfloat16": (lambda x: x.astype(jnp.bfloat16), 1, BF16),
    }  # fmt: skip


# Dots (m, k, n): the VALU operations summing the MXU's partial products over k.
DOTS = [(256, 128, 256), (256, 256, 256), (256, 512, 256), (512, 512, 512), (256, 1024, 256),
        (128, 2048, 128), (512, 128, 512), (128, 64, 128)]  # fmt: skip


def dot_kernel(m: int, k: int, n: int, dtype: str) -> Any:
    """One ``pallas_call`` doing a (m, k) x (k, n) dot into float32, and its inputs."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def body(a: Any, b: Any, out: Any) -> None:
        out[...] = jnp.dot(a[...], b[...], preferred_element_type=jnp.float32)

    def fn(a: Any, b: Any) -> Any:
        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32))(a, b)

    return fn, (jnp.zeros((m, k), dtype), jnp.zeros((k, n), dtype))


def kernel(op: Callable[..., Any], operands: int, dtype: str, out_dtype: str | None) -> Any:
    """One ``pallas_call`` doing ``op`` on whole (ROWS, COLS) blocks, and its inputs."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def body(*refs: Any) -> None:
        *ins, out = refs
        out[...] = op(*(r[...] for r in ins)).astype(out.dtype)

    shape = jax.ShapeDtypeStruct((ROWS, COLS), jnp.dtype(out_dtype or dtype))

    def fn(*xs: Any) -> Any:
        return pl.pallas_call(body, out_shape=shape)(*xs)

    return fn, tuple(jnp.zeros((ROWS, COLS), dtype) for _ in range(operands))


def per_vreg(slots: dict[str, int], copy: dict[str, int]) -> dict[str, float]:
    """Each unit's slots beyond the bare copy's, per float32 vreg of the block."""
    return {u: round((slots.get(u, 0) - copy.get(u, 0)) / WIDE_VREGS, 3) for u in UNITS}


def model_counts(
    fn: Callable[..., Any], args: tuple[Any, ...], name: str
) -> dict[str, float | None]:
    """The cost model's VALU operations and EUP pushes for the call, per float32 vreg."""
    from tpu_static_schedule import model_calls

    from ci_bench.measure.model.chips import chip

    model = model_calls(fn, args, name)
    if model["status"] != "ok":
        return {"VALU": None, "EUP": None}
    (call,) = model["calls"]
    rates = chip(name)
    eup = (call["eup_us"] or 0) * 1e-6 * rates.eup_ops_per_s
    return {"VALU": round(call["valu_ops"] / WIDE_VREGS, 3), "EUP": round(eup / WIDE_VREGS, 3)}


def run(on: str) -> dict[str, Any]:
    dump = Path(tempfile.mkdtemp(prefix="vector-ops-"))
    os.environ["LIBTPU_INIT_ARGS"] = " ".join(
        [os.environ.get("LIBTPU_INIT_ARGS", ""), f"--xla_jf_dump_to={dump}",
         "--xla_jf_dump_llo_text=true"]).strip()  # fmt: skip
    from tpu_deviceless import compiled_for, target
    from tpu_static_schedule import compiled_kernels

    from ci_bench.schema.model import MODEL_REVISION

    sharding = target(on)
    rows, copies = [], {}
    for dtype in (F32, BF16):
        for name, (op, operands, out_dtype) in operations().items():
            if out_dtype == dtype:
                continue  # a cast to its own type is a copy
            fn, args = kernel(op, operands, dtype, out_dtype)
            row: dict[str, Any] = {"op": name, "dtype": dtype}
            try:
                (compiled,) = compiled_kernels(fn, args, sharding, dump).values()
            except Exception as exc:  # the compiler's refusal, in its own words
                rows.append(row | {"error": " ".join(str(exc).split())[:200]})
                continue
            copies.setdefault(dtype, compiled["slots"]) if name == "copy" else None
            row |= {"bundles": compiled["bundles"], "slots": compiled["slots"],
                    "compiler_per_vreg": per_vreg(compiled["slots"], copies[dtype]),
                    "model_per_vreg": model_counts(fn, args, on)}  # fmt: skip
            rows.append(row)
            print(one_row(row), flush=True)
    print("\n" + DOT_HEADER)
    dots = []
    for dtype in (F32, BF16):
        for m, k, n in DOTS:
            fn, args = dot_kernel(m, k, n, dtype)
            try:
                (compiled,) = compiled_kernels(fn, args, sharding, dump).values()
            except Exception as exc:  # the compiler's refusal, in its own words
                print(f"| {m} x {k} x {n} | {dtype} | refused: {' '.join(str(exc).split())[:200]}")
                continue
            out = -(-m // 8) * -(-n // 128)  # float32 vregs of the result
            model = model_counts(fn, args, on)["VALU"]
            dots.append({"m": m, "k": k, "n": n, "dtype": dtype, "result_vregs": out,
                         "slots": compiled["slots"], "bundles": compiled["bundles"],
                         "model_valu": None if model is None else model * WIDE_VREGS})  # fmt: skip
            print(dot_row(dots[-1]), flush=True)
    return {"provenance": {"date": time.strftime("%Y-%m-%d"), "compiled_for":
                           compiled_for(on, sharding), "script": Path(__file__).name,
                           "block": [ROWS, COLS], "command": " ".join(sys.argv),
                           "model_revision": MODEL_REVISION},
            "rows": rows, "dots": dots}  # fmt: skip


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:g}"


def one_row(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"| {row['op']} | {row['dtype']} | refused: {row['error']} |"
    mine, model = row["compiler_per_vreg"], row["model_per_vreg"]
    return (
        f"| {row['op']} | {row['dtype']} | {_f(mine['VALU'])} | {_f(model['VALU'])} | "
        f"{_f(mine['EUP'])} | {_f(model['EUP'])} | {_f(mine['XLU'])} | {row['bundles']} |"
    )


def dot_row(row: dict[str, Any]) -> str:
    out, slots, model = row["result_vregs"], row["slots"], row["model_valu"]
    return (
        f"| {row['m']} x {row['k']} x {row['n']} | {row['dtype']} | {out} | "
        f"{slots['VPOP'] / out:g} | {slots['VALU'] / out:g} | "
        f"{_f(None if model is None else model / out)} |"
    )


DOT_HEADER = (
    "| dot m x k x n | operands | result vregs | MXU pops / vreg | VALU / vreg (compiler) | "
    "VALU / vreg (model) |\n|---|---|---|---|---|---|"
)
HEADER = (
    "| operation | dtype | VALU / vreg (compiler) | VALU (model) | EUP (compiler) | "
    "EUP (model) | XLU (compiler) | bundles |\n|---|---|---|---|---|---|---|---|"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--render", type=Path)
    parser.add_argument("--chip", default="v5e", choices=("v5e", "v6e"), help="compile for")
    args = parser.parse_args()
    if args.render:
        rows = json.loads(args.render.read_text())["rows"]
        print(HEADER)
        print("\n".join(one_row(r) for r in rows if r["op"] != "copy"))
        dots = json.loads(args.render.read_text()).get("dots", [])
        print("\n" + DOT_HEADER + "\n" + "\n".join(map(dot_row, dots)))
        return 0
    print(HEADER)
    found = run(args.chip)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "vector_ops.json").write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
