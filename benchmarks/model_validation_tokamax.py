"""The TPU model against TPU times nobody here took: tokamax's own autotuning measurements.

Source: the tokamax 0.0.12 wheel on PyPI (https://pypi.org/project/tokamax/0.0.12/,
Apache-2.0), files ``tokamax/data/autotuning/<chip>/pallas_mosaic_tpu_*.json``: for each
argument set, per config, ``evaluation_times_ms`` measured by tokamax's authors on the chip.
The points the benchmark reads are copied, trimmed (arguments, config, the median of the
evaluation times), into ``benchmarks/data/tokamax_tpu_autotuning.json`` with this provenance;
``--extract DIR`` regenerates that file from an unzipped wheel.

Each point is modelled from the kernel as tokamax ships it (imported from the installed
tokamax, never copied), traced as the measured chip: the ragged dot's three kernels (gmm,
its transposed-rhs form for dlhs, tgmm for drhs) through ``PallasMosaicTpuRaggedDot._fwd``
with the point's config. Nothing is fitted to these points: the model's constants are its
own (jax's chip table, the 0.35 µs step cost from jax's matmul guide on v5e). Per family and
chip: points, modelled (fully: ``status: ok``), median modelled/measured, IQR, share within
±25 % and ×2, Spearman. Run: ``python benchmarks/model_validation_tokamax.py`` (minutes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).parent / "data" / "tokamax_tpu_autotuning.json"
CHIPS = {"tpu_v5_lite": "v5e", "tpu7x": "7x"}
FILES = ("pallas_mosaic_tpu_ragged_dot.json",)
SOURCE = {
    "package": "tokamax 0.0.12 (https://pypi.org/project/tokamax/0.0.12/)",
    "license": "Apache-2.0",
    "files": [f"tokamax/data/autotuning/{c}/{f}" for c in CHIPS for f in FILES],
    "kept": "arguments, config and the median of evaluation_times_ms of every point",
}


def extract(
    wheel: Path,
    chips: dict[str, str] = CHIPS,
    files: tuple[str, ...] = FILES,
    source: dict = SOURCE,
) -> dict:
    """The trimmed points of an unzipped tokamax wheel (``wheel``: the folder above tokamax/):
    every config of every argument set in ``files`` of each chip folder in ``chips``."""
    points = []
    for folder, chip in chips.items():
        for name in files:
            path = wheel / "tokamax" / "data" / "autotuning" / folder / name
            for key, configs in json.loads(path.read_text()).items():
                for config, measured in configs.items():
                    points.append(
                        {
                            "chip": chip,
                            "file": name,
                            "args": json.loads(key),
                            "config": json.loads(config),
                            "median_ms": statistics.median(measured["evaluation_times_ms"]),
                        }
                    )
    return {"source": source, "points": points}


def _shape(text: str) -> tuple[str, tuple[int, ...]]:
    dtype, dims = text.rstrip("]").split("[")
    return {"bf16": "bfloat16", "f32": "float32"}[dtype], tuple(int(d) for d in dims.split(","))


def _ragged_dot_case(point: dict):
    """(family, fn, make_inputs) of a ragged dot point: the kernel tokamax runs for it."""
    import jax
    import jax.numpy as jnp
    from tokamax._src.ops.ragged_dot import base
    from tokamax._src.ops.ragged_dot import pallas_mosaic_tpu as tpu

    args = point["args"]
    (ldt, lshape), (rdt, rshape) = _shape(args["lhs"]), _shape(args["rhs"])
    sizes = args["group_sizes"]
    if isinstance(sizes, dict):  # tokamax's representative sizes for a total (its generator)
        sizes = base.generate_group_sizes(m=sizes["total_size"], num_groups=sizes["num_groups"])
    nums = args["ragged_dot_dimension_numbers"]
    pairs = nums["dot_dimension_numbers"]
    dims = jax.lax.RaggedDotDimensionNumbers(
        dot_dimension_numbers=tuple(tuple(tuple(x) for x in p) for p in pairs),
        lhs_ragged_dimensions=list(nums["lhs_ragged_dimensions"]),
        rhs_group_dimensions=list(nums["rhs_group_dimensions"]),
    )
    family = {
        tpu.DEFAULT_RAGGED_DOT_DIM_NUMS: "gmm",
        tpu.DLHS_RAGGED_DOT_DIM_NUMS: "gmm dlhs",
        tpu.DRHS_RAGGED_DOT_DIM_NUMS: "tgmm drhs",
    }[dims]
    op = tpu.PallasMosaicTpuRaggedDot()
    config = tpu.Config(**point["config"])
    precision = (jax.lax.Precision.DEFAULT, jax.lax.Precision.DEFAULT)

    def ragged_dot(lhs, rhs, group_sizes):
        out, _ = op._fwd(
            lhs,
            rhs,
            group_sizes=group_sizes,
            ragged_dot_dimension_numbers=dims,
            precision=precision,
            preferred_element_type=None,
            return_residuals=bool(args.get("return_residuals")),
            config=config,
        )
        return out

    def fn(group_sizes):
        # The operands are made inside: the model builds the case's inputs to read the
        # group sizes, and the operands would pass its budget (73 of 93 points over 1 GiB).
        return ragged_dot(jnp.zeros(lshape, ldt), jnp.zeros(rshape, rdt), group_sizes)

    operands = (
        jax.ShapeDtypeStruct(lshape, ldt),
        jax.ShapeDtypeStruct(rshape, rdt),
        jax.ShapeDtypeStruct((len(sizes),), jnp.int32),
    )
    return family, fn, lambda case, key: (jnp.array(sizes, jnp.int32),), (ragged_dot, operands)


def with_operands_as_inputs(model: Any, chip: str, function: Any, operands: tuple) -> float:
    """The case's modelled µs had its operands been inputs, as tokamax's callers pass them:
    the kernels' time as modelled, plus what the XLA operations around them move when the
    operands are not written by the function itself (``outside_bytes`` of that function,
    traced as the chip). The zeros ``fn`` makes would otherwise be charged as writes."""
    import jax

    from ci_bench.measure.model.aschip import as_chip
    from ci_bench.measure.model.chips import chip as chip_of
    from ci_bench.measure.model.outside import outside_bytes

    with as_chip(chip):
        moved = outside_bytes(jax.make_jaxpr(function)(*operands).jaxpr)
    figures = model.chips[chip]
    return (
        figures.modelled_us
        - (figures.outside_us or 0)
        + moved / chip_of(chip).hbm_bytes_per_s * 1e6
    )


def _as_inputs(operands: tuple, make_sizes: Any) -> Any:
    """make_inputs of the case as tokamax's callers have it: (lhs, rhs, group_sizes)."""
    import jax.numpy as jnp

    def make(case: Any, key: Any) -> tuple:
        lhs, rhs = (jnp.ones(o.shape, o.dtype) for o in operands[:2])
        return lhs, rhs, make_sizes(case, key)[0]

    return make


def _spearman(a: list[float], b: list[float]) -> float | None:
    if len(a) < 3:
        return None
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def _row(family: str, chip: str, rows: list[tuple[float, float]], total: int) -> str:
    if not rows:
        return f"| {family} | {chip} | {total} | 0 | – | – | – | – | – |"
    ratios = [m / t for m, t in rows]
    q1, med, q3 = np.percentile(ratios, [25, 50, 75])
    within = np.mean([0.75 <= r <= 1.25 for r in ratios])
    twice = np.mean([0.5 <= r <= 2 for r in ratios])
    rho = _spearman([m for m, _ in rows], [t for _, t in rows])
    rho_text = f"{rho:.2f}" if rho is not None else "–"
    return (
        f"| {family} | {chip} | {total} | {len(rows)} | {med:.2f} | {q1:.2f}–{q3:.2f} | "
        f"{within:.0%} | {twice:.0%} | {rho_text} |"
    )


def _floor_us(chip: Any) -> float:
    """The guard's floor: the MXU at its datasheet peak, or HBM at its bandwidth."""
    return max(chip.compute_us * (chip.mxu_fraction or 1.0), chip.memory_us)


def floor_line(checked: list[tuple[object, str, float]]) -> str:
    """What the floor guard (``ci_bench.judge.model.floor_error``) says of these measured
    points, each ``(model, chip, measured_ms)``: a correct kernel's real time must never be
    flagged "faster than the chip allows"; the lowest measured/floor is the margin left."""
    from ci_bench.judge.model import floor_error

    flagged = sum(floor_error(m, ms, chip) is not None for m, chip, ms in checked)  # type: ignore[arg-type]
    margins = [
        ms * 1e3 / _floor_us(m.chips[chip])  # type: ignore[attr-defined]
        for m, chip, ms in checked
    ]
    lowest = f"{min(margins):.2f}" if margins else "–"
    return (
        f"floor guard: {flagged} of {len(checked)} measured points flagged "
        f"(lowest measured / floor {lowest}; flagged below 0.5)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extract", type=Path, help="an unzipped tokamax wheel: rewrite DATA")
    parser.add_argument("--limit", type=int, default=0, help="at most this many points")
    parser.add_argument("--verbose", action="store_true", help="one line per point")
    parser.add_argument(
        "--as-shipped",
        action="store_true",
        help="the operands as the case's inputs, as tokamax's callers pass them (the model "
        "builds the group sizes alone); default: made inside the function, outside bytes "
        "taken from the same call with them as inputs",
    )
    options = parser.parse_args()
    if options.extract:
        DATA.parent.mkdir(exist_ok=True)
        DATA.write_text(json.dumps(extract(options.extract), indent=1) + "\n")
        print(f"wrote {DATA}")
        return
    try:
        import tokamax  # noqa: F401
    except ImportError:
        sys.exit("tokamax is not installed (pip install tokamax==0.0.12): nothing to model")
    sys.path.insert(0, str(Path(__file__).parent))
    from model_validation_kernels import ADHOC, adhoc

    from ci_bench.measure.model import analyze_case

    points = json.loads(DATA.read_text())["points"]
    if options.limit:
        points = points[: options.limit]
    found: dict[tuple[str, str], list[tuple[float, float]]] = {}
    totals: dict[tuple[str, str], int] = {}
    reasons: dict[str, int] = {}
    checked: list[tuple[object, str, float]] = []
    for point in points:
        family, fn, make, (ragged_dot, operands) = _ragged_dot_case(point)
        if options.as_shipped:
            fn, make = ragged_dot, _as_inputs(operands, make)
        key = (family, point["chip"])
        totals[key] = totals.get(key, 0) + 1
        model = analyze_case(adhoc(fn, make), ADHOC, [point["chip"]])
        if model.status != "ok":
            why = (model.reason or model.status)[:120]
            reasons[why] = reasons.get(why, 0) + 1
            if options.verbose:
                print(f"  {family} {point['chip']} {point['config']}: {why}")
            continue
        modelled = (
            model.chips[point["chip"]].modelled_us / 1e3
            if options.as_shipped
            else with_operands_as_inputs(model, point["chip"], ragged_dot, operands) / 1e3
        )
        found.setdefault(key, []).append((modelled, point["median_ms"]))
        checked.append((model, point["chip"], point["median_ms"]))
        if options.verbose:
            print(
                f"  {family} {point['chip']} {point['args']['lhs']} {point['args']['rhs']} "
                f"{point['config']}: modelled {modelled:.3f} ms, measured "
                f"{point['median_ms']:.3f} ms ({modelled / point['median_ms']:.2f})"
            )
    print(
        "| family | chip | measured points | modelled (ok) | median modelled/measured | IQR "
        "| within ±25 % | within ×2 | Spearman |"
    )
    print("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    for key in sorted(totals):
        print(_row(key[0], key[1], found.get(key, []), totals[key]))
    everything = [r for rows in found.values() for r in rows]
    print(_row("all ragged dot", "v5e + 7x", everything, sum(totals.values())))
    print(floor_line(checked))
    for why, count in sorted(reasons.items(), key=lambda x: -x[1]):
        print(f"not modelled ({count}): {why}")


if __name__ == "__main__":
    main()
