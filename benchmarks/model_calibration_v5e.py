"""Do the chip microbenchmark's v5e constants move the cost model toward the chip?

The TPU v5e validation run (benchmarks/data/tpu_v5e_model_validation_2026-12-06.json) set
the model's figure beside the measured device time of jax's shipped Pallas kernels and the
project's. The chip microbenchmark of the same day (tpu_v5e_microbench_2026-12-06.json)
measured two of the constants the model takes as given: a streaming HBM copy's bandwidth
(read + write) and the fixed cost of one grid step (the slope of time over grid steps).
This script re-models, on any host (no TPU: ``analyze_case`` traces *as* v5e), every point
of the validation JSON that has a measured_us (GLA's points are its shipped baseline's
v5e run instead: the kernel as it ships, ``SHIPPED``), under variants of v5e's constants:

- ``current``: ``chip("v5e")`` unchanged; must reproduce the JSON's modelled_us (the largest
  relative difference is printed, and a difference past 1e-6 fails the run);
- ``hbm-measured``: ``hbm_bytes_per_s`` = the microbenchmark's copy figure;
- ``step-measured``: ``step_overhead_us`` = the microbenchmark's per-step slope;
- ``both``: the two together.

Both figures are read from the microbenchmark's JSON, never written here. This is a check
of independently measured constants, *never* a fit: no constant is tuned to the validation
kernels, whose measured times are only compared against. Per variant it prints, per family
and for all families together, the points, the median and range of model/measured, how many
are within ±25 % and Spearman's rank correlation of modelled vs measured.

The model reads the chip through ``ci_bench.measure.model.chips.chip`` (``analyze_case``
imports it at each call); a variant replaces that function, and any module that holds it
under its own name, by one answering v5e with ``dataclasses.replace`` of the original Chip.
Evidence that it took is printed: the Chip each variant sees and how many points it changed.

Run from the repository's root (full-size inputs are built on the CPU: a few minutes):

    .venv/bin/python benchmarks/model_calibration_v5e.py
    .venv/bin/python benchmarks/model_calibration_v5e.py --families flash,gmm \\
        --variants current,both --json /tmp/calibration.json
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):  # the repository (kernels, ci_bench), benchmarks
    if _path not in sys.path:
        sys.path.insert(0, _path)

from tpu_model_validation import family_table, modelled, one_line, summary  # noqa: E402
from tpu_model_validation_families import FAMILIES  # noqa: E402

from ci_bench.measure.model import chips as chips_module  # noqa: E402

DATA = HERE / "data"
VALIDATION = DATA / "tpu_v5e_model_validation_2026-12-06.json"
MICROBENCH = DATA / "tpu_v5e_microbench_2026-12-06.json"
CHIP = "v5e"
REPRODUCE = 1e-6  # the largest relative difference ``current`` may show against the JSON
ALL = "all families"
V5E_KIND = "TPU v5 lite"
# Families whose points are their shipped baseline's ci run, not the validation JSON's: the
# validation run measured GLA 0.5.0, and the kernel has been rewritten since (0.6.0's
# backward, 0.7.0's forward); its baseline holds the chip's run of the kernel as it ships.
SHIPPED = ("gla",)


class PointTimeout(BaseException):
    """A point past --point-timeout (a BaseException: the model's own ``except Exception``
    must not turn it into a "not modelled")."""


def microbench_constants(path: Path) -> dict[str, float]:
    """The copy's bandwidth (bytes/s) and the per-step slope (µs) from the microbenchmark."""
    rows = json.loads(path.read_text())["rows"]

    def one(bench: str, case: str, key: str) -> float:
        found = [r[key] for r in rows if r["bench"] == bench and r["case"] == case and key in r]
        if len(found) != 1:
            raise SystemExit(f"{path.name}: expected one {bench} row {case!r} with {key}")
        return float(found[0])

    return {
        "hbm_bytes_per_s": one("hbm", "copy f32 (read + write)", "gb_s") * 1e9,
        "step_overhead_us": one("step", "per step (slope)", "us"),
    }


def variant_table(measured: dict[str, float]) -> dict[str, dict[str, float]]:
    """Each variant's overrides of v5e's Chip fields."""
    hbm = {"hbm_bytes_per_s": measured["hbm_bytes_per_s"]}
    step = {"step_overhead_us": measured["step_overhead_us"]}
    return {"current": {}, "hbm-measured": hbm, "step-measured": step, "both": hbm | step}


@contextmanager
def chip_variant(overrides: dict[str, float]) -> Iterator[Any]:
    """``chip(CHIP)`` answers the Chip with ``overrides`` inside the block, wherever the
    model looks it up: the chips module's ``chip`` and any ci_bench module that imported it
    by name. Yields the Chip the model now sees."""
    original = chips_module.chip
    if not overrides:
        yield original(CHIP)
        return
    changed = dataclasses.replace(original(CHIP), **overrides)

    def patched(name: str) -> Any:
        return changed if name == CHIP else original(name)

    holders = [
        m
        for name, m in list(sys.modules.items())
        if name.startswith("ci_bench") and getattr(m, "chip", None) is original
    ]
    for module in holders:
        module.chip = patched  # type: ignore[attr-defined]
    try:
        yield chips_module.chip(CHIP)
    finally:
        for module in holders:
            module.chip = original  # type: ignore[attr-defined]


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Raise PointTimeout past ``seconds`` (SIGALRM: the main thread, between bytecodes)."""

    def expired(signum: int, frame: Any) -> None:
        raise PointTimeout(f"past --point-timeout {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def builds(family: str) -> dict[str, Callable[[], Callable[[], dict[str, Any]]]]:
    """Each point's build: it makes the point's inputs and returns what models it."""

    def modeller(build: Callable[[], Any]) -> Callable[[], dict[str, Any]]:
        fn, args = build()
        return lambda: modelled(fn, args, CHIP)

    return {name: functools.partial(modeller, b) for name, b in FAMILIES[family].points(False)}


def shipped_points(kernel: str) -> tuple[Path, list[dict[str, Any]], dict[str, Callable]]:
    """The kernel as it ships: its baseline's TPU v5e entry (the ci run promoted from the
    chip, device time by the profiler timer), each case's median beside the figure that run
    modelled, and builds that model the case as ``analyze --chip v5e`` does (its tuned
    config read as the chip)."""
    import importlib

    from ci_bench.contract.spec import Case
    from ci_bench.measure.kernel_side import head_specs
    from ci_bench.measure.model import analyze_case

    version = importlib.import_module(f"kernels.{kernel}").VERSION
    path = HERE.parent / "baselines" / f"{kernel}_v{version}.json"
    entries = json.loads(path.read_text())["entries"]
    entry = next((e for e in entries if e["device"]["device_kind"] == V5E_KIND), None)
    if entry is None or entry["settings"].get("timer") != "profiler":
        raise SystemExit(f"{path.name}: no entry measured on a {V5E_KIND} by the profiler timer")
    spec = head_specs([f"kernels.{kernel}"], str(HERE.parent))[kernel]
    seed = entry["settings"]["seed"]

    def modeller(case: Case) -> Callable[[], dict[str, Any]]:
        def model() -> dict[str, Any]:
            got = analyze_case(spec, case, [CHIP], seed=seed)
            if got.status != "ok":
                return {"partial": got.reason or got.status}
            return {"modelled_us": got.chips[CHIP].modelled_us}

        return model

    points, found = [], {}
    for c in entry["cases"]:
        if c["status"] != "ok" or not c.get("pallas"):
            continue
        stored = (c.get("model") or {}).get("chips", {}).get(CHIP, {}).get("modelled_us")
        points.append({"family": kernel, "name": c["id"], "modelled_us": stored,
                       "measured_us": c["pallas"]["median_ms"] * 1e3})  # fmt: skip
        case = Case(c["kernel"], c["params"], c["dtype"], c["mode"])
        found[c["id"]] = functools.partial(modeller, case)
    return path, points, found


def remodel(
    point: dict[str, Any],
    build: Callable[[], Callable[[], dict[str, Any]]] | None,
    variants: dict[str, dict[str, float]],
) -> dict[str, Any]:
    """The point's figure under every variant (one build, one analyze_case per variant)."""
    row: dict[str, Any] = {key: point[key] for key in ("family", "name", "measured_us")}
    row["json_modelled_us"] = point.get("modelled_us")
    if build is None:
        return {**row, "error": "no such point in tpu_model_validation_families.FAMILIES"}
    try:
        model = build()
    except Exception as exc:
        return {**row, "error": "build: " + one_line(exc)}
    row["variants"] = {}
    for name, overrides in variants.items():
        with chip_variant(overrides):
            got = model()
        row["variants"][name] = {k: got[k] for k in ("modelled_us", "partial") if k in got}
    return row


def rows_for(rows: list[dict[str, Any]], variant: str) -> list[dict[str, Any]]:
    """The shape tpu_model_validation.summary reads: family, measured_us, modelled_us, ratio."""
    out = []
    for r in rows:
        one = {"family": r["family"], "name": r["name"], "measured_us": r["measured_us"]}
        if "error" in r or "skipped" in r:
            one["error" if "error" in r else "skipped"] = r.get("error") or r["skipped"]
        else:
            figure = r["variants"][variant].get("modelled_us")
            if figure is not None:
                one |= {"modelled_us": figure, "ratio": figure / r["measured_us"]}
        out.append(one)
    return out


def summaries(rows: list[dict[str, Any]], families: list[str]) -> list[dict[str, Any]]:
    mine = [s for s in (summary(rows, f) for f in families) if s["points"]]
    return [*mine, summary([{**r, "family": ALL} for r in rows], ALL)]


def reproduction(rows: list[dict[str, Any]]) -> tuple[float, str]:
    """The largest relative difference of ``current`` from the JSON's modelled_us."""
    worst, where = 0.0, "–"
    for r in rows:
        now = r.get("variants", {}).get("current", {}).get("modelled_us")
        then = r["json_modelled_us"]
        if then is None or now is None:
            if then is not None or now is not None:
                worst, where = float("inf"), f"{r['family']} {r['name']}: modelled once only"
            continue
        diff = abs(now - then) / then
        if diff >= worst and worst != float("inf"):
            worst, where = diff, f"{r['family']} {r['name']}"
    return worst, where


def evidence(rows: list[dict[str, Any]], variants: list[str]) -> list[str]:
    """Per variant: how many points its figure moved from ``current``, and one example."""
    lines = []
    done = [r for r in rows if "variants" in r]
    for name in variants:
        if name == "current" or "current" not in variants:
            continue
        pairs = [
            (r, r["variants"]["current"].get("modelled_us"), r["variants"][name].get("modelled_us"))
            for r in done
        ]
        moved = [(r, a, b) for r, a, b in pairs if a and b and a != b]
        line = f"  {name}: changed {len(moved)}/{len(done)} points"
        if moved:
            r, a, b = max(moved, key=lambda p: abs(p[2] / p[1] - 1))
            line += f"; most: {r['family']} {r['name']}: {a:,.1f} -> {b:,.1f} µs ({b / a - 1:+.1%})"
        lines.append(line)
    return lines


def described(overrides: dict[str, float]) -> str:
    parts = {
        "hbm_bytes_per_s": lambda x: f"hbm_bytes_per_s {x / 1e9:.1f} GB/s",
        "step_overhead_us": lambda x: f"step_overhead_us {x:.3f} µs",
    }
    return ", ".join(parts[k](v) for k, v in overrides.items()) or "v5e as chips.py gives it"


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=None, help="comma-separated (default: all)")
    parser.add_argument("--variants", default="current,hbm-measured,step-measured,both")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT", help="write figures")
    parser.add_argument("--point-timeout", type=int, default=300, help="seconds per point")
    parser.add_argument(
        "--layouts",
        choices=("row-major", "libtpu"),
        default="row-major",
        help="the inputs' and outputs' stored layouts: row-major (a host without the chip) "
        "or libtpu's for a v5e, compiled here without one (the chip's own, as its run models; "
        "needs jax[tpu] installed)",
    )
    return parser.parse_args()


def use_layouts(which: str) -> None:
    """Model with libtpu's v5e layouts, as ``analyze_case`` on the chip asks its client."""
    if which == "row-major":
        return
    import tpu_deviceless

    from ci_bench.measure import chip as chip_edge

    ask = tpu_deviceless.stored_layouts("v5e")
    chip_edge.stored_layouts = lambda: ask  # type: ignore[assignment]


def main() -> int:
    opts = parse()
    use_layouts(opts.layouts)
    start = time.monotonic()
    found = json.loads(VALIDATION.read_text())
    constants = microbench_constants(MICROBENCH)
    table = variant_table(constants)
    families = opts.families.split(",") if opts.families else list(found["families"])
    variants = opts.variants.split(",")
    for given, known in ((families, FAMILIES), (variants, table)):
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise SystemExit(f"unknown {unknown}; known: {', '.join(known)}")
    chosen = {name: table[name] for name in variants}
    print(f"validation: {VALIDATION.name}; microbenchmark: {MICROBENCH.name}")
    print(f"layouts: {opts.layouts}")
    for name, overrides in chosen.items():
        with chip_variant(overrides) as seen:
            print(
                f"  {name}: the model sees v5e hbm_bytes_per_s {seen.hbm_bytes_per_s / 1e9:.1f}"
                f" GB/s, step_overhead_us {seen.step_overhead_us:.3f}"
            )
    rows: list[dict[str, Any]] = []
    for family in families:
        points = [p for p in found["points"] if p["family"] == family and p.get("measured_us")]
        began = time.monotonic()
        try:
            if family in SHIPPED:
                source, points, known = shipped_points(family)
                print(f"[{family}] the points of {source.name}'s {V5E_KIND} run", flush=True)
            else:
                known = builds(family)
        except Exception as exc:
            known, why = {}, one_line(exc)
            print(f"[{family}] cannot list its points: {why}", flush=True)
        for point in points:
            try:
                with deadline(opts.point_timeout):
                    row = remodel(point, known.get(point["name"]), chosen)
            except PointTimeout as exc:
                row = {**{k: point[k] for k in ("family", "name", "measured_us")}}
                row |= {"json_modelled_us": point.get("modelled_us"), "skipped": str(exc)}
            rows.append(row)
            figures = ", ".join(
                f"{v} {f.get('modelled_us', float('nan')):,.1f}"
                for v, f in row.get("variants", {}).items()
            )
            note = row.get("error") or row.get("skipped") or figures
            print(f"[{family}] {point['name']}: measured {point['measured_us']:,.1f} µs; {note}")
        print(f"[{family}] {len(points)} points, {time.monotonic() - began:.0f} s", flush=True)
    tables = {}
    for name in variants:
        tables[name] = summaries(rows_for(rows, name), families)
        print(f"\n## {name}: {described(chosen[name])}\n")
        print(family_table(tables[name]))
    worst, where = reproduction(rows) if "current" in variants else (None, "–")
    print("\nthe patch took (figures moved from current):")
    print("\n".join(evidence(rows, variants)) or "  (needs current and another variant)")
    if worst is not None:
        print(f"current vs the JSON's modelled_us: max relative difference {worst:.2e} ({where})")
    seconds = time.monotonic() - start
    print(f"{seconds:.0f} s")
    if opts.json:
        opts.json.write_text(
            json.dumps(
                {
                    "validation": VALIDATION.name,
                    "microbench": MICROBENCH.name,
                    "microbench_constants": constants,
                    "variants": chosen,
                    "families": families,
                    "layouts": opts.layouts,
                    "reproduction_max_rel_diff": worst,
                    "seconds": round(seconds, 1),
                    "summary": tables,
                    "points": rows,
                },
                indent=1,
            )
        )
    return 1 if worst is not None and worst > REPRODUCE else 0


if __name__ == "__main__":
    sys.exit(main())
