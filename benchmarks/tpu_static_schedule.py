"""The TPU compiler's own schedule of each Pallas kernel beside the cost model's step.

libtpu, compiling for a v5e with no chip attached (``tpu_deviceless.py``), writes each
kernel's final VLIW bundles and, per bundle, how many slots of each unit it fills
(``--xla_jf_dump_to``; the files ``ci-bench profile`` reads on a chip). Where a kernel's code
has no loop but the grid's own, one grid step issues exactly those bundles, one a cycle when
nothing stalls: its issue time is ``bundles / clock`` and the step's work per unit is each
column's sum. That is the compiler's answer to two questions the chip's time alone cannot
split (docs/MODEL.md, "GLA 0.7.0"): how much vector work the compiler issues for a body
(against the model's count of VALU operations), and how long the step's instruction stream
is (against the model's vector time plus its fixed per-step overhead). Nothing is timed and
nothing is fitted: the model's figures are printed as they are, and the measured times are
the chip's stored ones (the validation run; for GLA 0.7.0, its baseline's ci run).

A kernel with a loop of its own (flash attention's inner loop over key blocks, paged
attention's over pages) is listed with its loops and no per-step time: its bundles are code,
not a step.

    ALLOW_MULTIPLE_LIBTPU_LOAD=1 python benchmarks/tpu_static_schedule.py --out OUT \\
        [--only gla-ci,flash] [--quick] [--keep-dumps]
    python benchmarks/tpu_static_schedule.py --render OUT/static_schedule.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):  # the repository (kernels, ci_bench), benchmarks
    if _path not in sys.path:
        sys.path.insert(0, _path)

DATA = HERE / "data"
VALIDATION = DATA / "tpu_v5e_model_validation_2026-12-06.json"
UNIT_COLUMNS = ("MXU", "XLU", "VALU", "VPOP", "EUP", "VLOAD", "VLOAD:FILL", "VSTORE",
                "VSTORE:SPILL", "SALU")  # fmt: skip
_DUMP = re.compile(r"^(\d+)-(.+?)-(\d+)-([\w\-]+)\.txt$")
_LOOP_BODY = re.compile(r"^\s*0x[0-9a-f]+\s+LB:", re.MULTILINE)
# A bundle's line: its address, a control-target mark (LB: a loop's first bundle), and one
# ">" per loop it is in.
_BUNDLE = re.compile(r"^\s*(?:0x[0-9a-f]+|0)\s+(?:\w\w:)?\s*:?\s*(>*)\s*\{")


def read_kernels(folder: Path) -> dict[str, dict[str, Any]]:
    """Each Pallas kernel libtpu dumped into ``folder``: its bundles, loops and per-unit
    slot sums (the final schedule)."""
    from ci_bench.measure.unit_metrics import PALLAS_TARGET

    files: dict[str, dict[str, Path]] = {}
    for path in folder.iterdir():
        found = _DUMP.match(path.name)
        if found:
            files.setdefault(found[2], {})[found[4]] = path
    kernels = {}
    for name, passes in files.items():
        analysis = passes.get("schedule-analysis_final_bundles")
        usage = passes.get("final_hlo-static-per-bundle-utilization")
        code = passes.get("final_bundles")
        if name == "TLP" or analysis is None or usage is None or code is None:
            continue  # TLP: the program's top-level code, which launches the kernels
        if PALLAS_TARGET not in analysis.read_text(errors="replace"):
            continue
        text = code.read_text(errors="replace")
        kernels[name] = {"loops": len(_LOOP_BODY.findall(text)), "by_depth": by_depth(text),
                         **slot_sums(usage.read_text())}  # fmt: skip
    return kernels


def by_depth(code: str) -> dict[str, int]:
    """Bundles by the number of loops they are in ("0": straight-line code; "2": inside a
    loop inside a loop). A loop's count holds every branch of its body, so it bounds what
    one iteration issues: a region the body skips on most iterations is in it too."""
    depths: dict[str, int] = {}
    for line in code.splitlines():
        found = _BUNDLE.match(line)
        if found:
            depths[str(len(found[1]))] = depths.get(str(len(found[1])), 0) + 1
    return depths


def slot_sums(text: str) -> dict[str, Any]:
    """The per-bundle utilisation table: bundles and each unit's filled slots in all."""
    rows = text.split("== UTILIZATION:", 1)[-1].split("\n")
    numbers = [[int(x) for x in r.split()] for r in rows if re.fullmatch(r"[\d ]+", r.strip())]
    numbers = [r for r in numbers if len(r) == len(UNIT_COLUMNS)]
    sums = [sum(column) for column in zip(*numbers, strict=True)] if numbers else []
    return {"bundles": len(numbers), "slots": dict(zip(UNIT_COLUMNS, sums, strict=True))}


def model_calls(fn: Callable[..., Any], args: tuple[Any, ...], chip: str) -> dict[str, Any]:
    """The cost model's case and per-call figures on ``chip`` (traced on this CPU)."""
    from model_validation_kernels import ADHOC, adhoc

    from ci_bench.measure.model import analyze_case
    from ci_bench.measure.model.chips import chip as chip_of

    model = analyze_case(adhoc(fn, lambda c, k, a=args: a), ADHOC, [chip])
    rate = chip_of(chip).vpu_ops_per_s
    if model.status != "ok":
        return {"status": model.status, "reason": model.reason}
    keys = ("modelled_us", "compute_us", "vector_us", "eup_us", "memory_us", "overhead_us")
    calls = []
    for call in model.calls:
        figures = call.chips[chip]
        row = {k: getattr(figures, k, None) for k in keys}
        row["valu_ops"] = (figures.vector_us or 0) * 1e-6 * rate
        calls.append({"name": call.name, "grid_steps": call.grid_steps, **row})
    case = model.chips[chip]
    return {"status": "ok", "modelled_us": case.modelled_us, "outside_us": case.outside_us,
            "clock_hz": chip_of(chip).clock_hz, "calls": calls}  # fmt: skip


def compiled_kernels(
    fn: Callable[..., Any], args: tuple[Any, ...], sharding: Any, dump: Path
) -> dict:
    """``fn`` compiled by libtpu for ``sharding``'s chip, its kernels read from the dump.
    libtpu reads its flags once per process, so the dump folder is fixed (``dump``) and
    emptied before each compile."""
    from tpu_operand_placement import compiled_text

    for path in dump.iterdir():
        path.unlink()
    compiled_text(fn, args, sharding)
    return read_kernels(dump)


def joined(kernels: dict[str, dict[str, Any]], model: dict[str, Any]) -> list[dict[str, Any]]:
    """Each compiled kernel beside the model's call of the same name (``chunk_gla_fwd.1``
    is the model's ``chunk_gla_fwd``): the per-step issue time where the code has no loop
    of its own."""
    calls = {c["name"]: c for c in model.get("calls", [])}
    clock = model.get("clock_hz")
    only = next(iter(calls.values())) if len(calls) == 1 and len(kernels) == 1 else None
    rows = []
    for name, kernel in sorted(kernels.items()):
        call = calls.get(name.rsplit(".", 1)[0]) or only or {}
        steps = call.get("grid_steps")
        row = {"kernel": name, **kernel, "model": call}
        if kernel["loops"] <= 1 and steps and clock:
            row["static_us"] = kernel["bundles"] * steps / clock * 1e6
            row["static_valu_per_step"] = kernel["slots"]["VALU"]
            row["model_valu_per_step"] = call["valu_ops"] / steps
        rows.append(row)
    return rows


def validation_points(families: list[str], quick: bool) -> list[tuple[str, str, Callable]]:
    from tpu_model_validation_families import FAMILIES

    return [(f, name, build) for f in families for name, build in FAMILIES[f].points(quick)]


def gla_ci_points() -> list[tuple[str, str, Callable]]:
    """GLA 0.7.0's ci cases, forward and backward, at the chunk its v5e tuned file gives."""
    import jax

    import kernels.gla as gla
    from ci_bench.contract.spec import Case
    from ci_bench.spec import tuned_config

    points = []
    for params in gla.CI:
        for dtype in gla.DTYPES:
            config = tuned_config("gla", gla.VERSION, params, dtype, directory=gla.BASELINES,
                                  default=gla.TUNABLES.default, chip="v5e",
                                  tunables=gla.TUNABLES)  # fmt: skip
            chunk = config["chunk_size"]
            case = Case("gla", params, dtype)

            def build(case=case, chunk=chunk, backward=False):
                args = tuple(gla.make_inputs(case, jax.random.PRNGKey(0)))
                forward = gla.with_chunk(chunk)
                if not backward:
                    return forward, args
                # The backward mode's timed call (ci_bench.measure.modes): the pullback
                # applied to a cotangent, its residuals inputs (abstract: nothing runs here).
                pullback = jax.eval_shape(lambda *a: jax.vjp(forward, *a)[1], *args)
                cotangent = jax.eval_shape(forward, *args)
                return (lambda pb, ct: pb(ct)), (pullback, cotangent)

            name = f"{case.id} chunk {chunk}"
            points.append(("gla-ci", name, build))
            points.append(("gla-ci", f"{name} backward", lambda b=build: b(backward=True)))
    return points


def measured_times() -> dict[tuple[str, str], float]:
    """The chip's times: the validation run's points, and GLA's baseline ci run."""
    found: dict[tuple[str, str], float] = {}
    for row in json.loads(VALIDATION.read_text())["points"]:
        if row.get("measured_us"):
            found[(row["family"], row["name"])] = row["measured_us"]
    import kernels.gla as gla

    baseline = json.loads((gla.BASELINES / f"gla_v{gla.VERSION}.json").read_text())
    for case in baseline["entries"][0]["cases"]:
        found[("gla-ci", case["id"])] = case["pallas"]["median_ms"] * 1000
    return found


def run(args: argparse.Namespace) -> dict[str, Any]:
    dump = Path(tempfile.mkdtemp(prefix="static-schedule-"))
    os.environ["LIBTPU_INIT_ARGS"] = " ".join(
        [os.environ.get("LIBTPU_INIT_ARGS", ""), f"--xla_jf_dump_to={dump}",
         "--xla_jf_dump_llo_text=true"]).strip()  # fmt: skip
    from tpu_deviceless import compiled_for, target

    sharding = target("v5e")
    wanted = args.only.split(",")
    points = validation_points([f for f in wanted if f != "gla-ci"], args.quick)
    points += gla_ci_points() if "gla-ci" in wanted else []
    times = measured_times()
    rows = []
    for family, name, build in points:
        began = time.monotonic()
        fn, inputs = build()
        model = model_calls(fn, inputs, "v5e")
        kernels = compiled_kernels(fn, inputs, sharding, dump)
        if args.keep_dumps and args.out:
            kept = args.out / "dumps" / re.sub(r"[^\w.-]+", "_", f"{family} {name}")
            kept.mkdir(parents=True, exist_ok=True)
            for path in dump.glob("*final_*"):  # the bundles and their unit slots
                shutil.copy(path, kept / path.name)
        key = name.split(" chunk ")[0] + (" backward" if name.endswith("backward") else "")
        measured = times.get((family, key.replace(" backward", "/backward")))
        row = {"family": family, "name": name, "measured_us": measured,
               "modelled_us": model.get("modelled_us"), "outside_us": model.get("outside_us"),
               "kernels": joined(kernels, model), "seconds": time.monotonic() - began}  # fmt: skip
        row["issue_us"] = issue_us(row)
        rows.append(row)
        print(one_row(row), flush=True)
    return {"provenance": {"date": time.strftime("%Y-%m-%d"), "compiled_for":
                           compiled_for("v5e", sharding), "script": Path(__file__).name,
                           "command": " ".join(sys.argv)}, "rows": rows}  # fmt: skip


def issue_us(row: dict[str, Any]) -> float | None:
    """The compiler's issue time of every kernel (bundles x steps / clock) plus the model's
    XLA operations around them: known only where no kernel has a loop of its own."""
    kernels = row["kernels"]
    if not kernels or any("static_us" not in k for k in kernels) or row["outside_us"] is None:
        return None
    return sum(k["static_us"] for k in kernels) + row["outside_us"]


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """Per family: the model's and the issue time's ratio to the chip's, where both known."""
    lines = ["family: points, median and range of model / chip, of issue / chip (±25 %)"]
    for family in dict.fromkeys(r["family"] for r in rows):
        mine = [r for r in rows if r["family"] == family and r["measured_us"] and r["issue_us"]]
        if not mine:
            lines.append(f"{family}: no point with every kernel loop-free and measured")
            continue
        parts = [f"{family}: {len(mine)}"]
        for key in ("modelled_us", "issue_us"):
            ratios = sorted(r[key] / r["measured_us"] for r in mine)
            inside = sum(0.75 <= x <= 1.25 for x in ratios)
            parts.append(f"{key[:-3]} {statistics.median(ratios):.2f} ({ratios[0]:.2f}-"
                         f"{ratios[-1]:.2f}, {inside}/{len(ratios)})")  # fmt: skip
        lines.append(", ".join(parts))
    return lines


def _f(x: float | None, fmt: str = ".1f") -> str:
    return "–" if x is None else format(x, fmt)


def one_row(row: dict[str, Any]) -> str:
    parts = [f"{row['family']:7s} {row['name'][:58]:58s} measured {_f(row['measured_us'])}"
             f" model {_f(row['modelled_us'])} (outside {_f(row['outside_us'])}), issue "
             f"{_f(row.get('issue_us'))}"]  # fmt: skip
    for k in row["kernels"]:
        m = k["model"]
        step = (
            (
                f" static {_f(k.get('static_us'))} µs, VALU/step {k['slots']['VALU']} vs "
                f"{_f(k.get('model_valu_per_step'), '.0f')}"
            )
            if "static_us" in k
            else ""
        )
        depth = k.get("by_depth") if k["loops"] > 1 else None
        step += f" (by loop depth {depth})" if depth else ""
        parts.append(f"    {k['kernel']}: loops {k['loops']}, bundles {k['bundles']}{step}; "
                     f"model vector {_f(m.get('vector_us'))} + overhead "
                     f"{_f(m.get('overhead_us'))}, call {_f(m.get('modelled_us'))}")  # fmt: skip
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", default="gla-ci,flash,splash,gmm,tgmm,paged,matmul")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--render", type=Path)
    parser.add_argument(
        "--keep-dumps", action="store_true", help="each point's final bundles under OUT/dumps"
    )
    args = parser.parse_args()
    if args.render:
        rows = json.loads(args.render.read_text())["rows"]
        for row in rows:
            print(one_row(row))
        print("\n".join(summary(rows)))
        return 0
    found = run(args)
    print("\n".join(summary(found["rows"])))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "static_schedule.json").write_text(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
