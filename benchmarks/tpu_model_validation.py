"""The cost model against a TPU chip: Pallas kernels as jax ships them (``flash``,
``splash``, megablox ``gmm`` and ``tgmm``, ``paged``) and the project's (``matmul``,
``gla``), each point measured on this chip and set beside the model's figure for ``--chip``
(v5e by default, ``analyze_case`` traced as that chip); per family, how close it comes.
The points and their kernels are tpu_model_validation_families.py's.

Run from the repository's root on a TPU v5e host (jax with libtpu), output under OUT:

    python benchmarks/tpu_model_validation.py --out "$OUT"
    python benchmarks/tpu_model_validation.py --out "$OUT" --families flash,gmm --repeats 20
    python benchmarks/tpu_model_validation.py --out /tmp/mv_quick --quick  # plumbing, CPU
    python benchmarks/tpu_model_validation.py --out "$OUT" \\
        --render "$OUT1/model_validation_v5e.json" "$OUT2/model_validation_v5e.json"

Measured figures are device time from the profiler (``tpu_microbench.device_us``: a
jax.profiler trace's XLA Modules line, read by ``ci_bench.measure.timers``): the median of
``--repeats`` calls after two warm-up calls, compiles excluded. ``--quick`` shrinks every
shape for a CPU (Pallas interpreted; jax's kernels under ``force_tpu_interpret_mode``):
its figures are CPU op times and mean nothing. A model status other than "ok" is "partial"
with the model's reason, never a figure; a kernel that fails to import, build, compile or
run is that point's error and the run goes on; past ``--deadline`` seconds no point starts.

Writes ``model_validation_<chip>.json`` (provenance; per point: family, name, measured_us
or error, modelled_us or partial reason, ratio model/measured) and ``.md`` (per family:
points, modelled, median and range of model/measured, within ±25 %, Spearman's rank
correlation of modelled vs measured; then every point), both after every point.

``--render`` measures nothing: it merges the ``.json`` of earlier runs for one model chip
(say one that hit its deadline and one with ``--families`` for the rest) and writes the
same two files. Per family and point name a later run's point replaces an earlier one
unless it says less: a skipped point never replaces an error or a figure, an error never
replaces a figure. Provenance becomes the list of the runs' own, each point's ``run`` its
1-based index there.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import jax

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):  # the repository (kernels, ci_bench), benchmarks
    if _path not in sys.path:
        sys.path.insert(0, _path)

from model_validation_kernels import ADHOC, adhoc  # noqa: E402
from tpu_microbench import device_us, provenance  # noqa: E402
from tpu_model_validation_families import FAMILIES, Built, Point  # noqa: E402

from ci_bench.measure.model import analyze_case  # noqa: E402
from ci_bench.measure.model.chips import CHIP_NAMES  # noqa: E402
from ci_bench.schema.model import MODEL_REVISION  # noqa: E402

WITHIN = 0.25  # "close": model/measured within ±25 %


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def modelled(fn: Callable[..., Any], args: tuple[Any, ...], chip: str) -> dict[str, Any]:
    """The model's figure for ``chip``, or "partial" with the model's reason."""
    try:
        model = analyze_case(adhoc(fn, lambda c, k, a=args: a), ADHOC, [chip])
    except Exception as exc:  # analyze_case records its own failures; this is a safety net
        return {"model_status": "error", "partial": one_line(exc)}
    if model.status != "ok":
        return {"model_status": model.status, "partial": model.reason or model.status}
    figure = model.chips[chip]
    return {"model_status": "ok", "modelled_us": figure.modelled_us, "bound": figure.bound,
            "fits": figure.fits, "grid_steps": model.grid_steps,
            "hbm_bytes": model.hbm_bytes}  # fmt: skip


def measured(fn: Callable[..., Any], args: tuple[Any, ...], repeats: int, force: bool) -> float:
    """Device µs per call; ``force``: under jax's TPU interpreter (a CPU run of jax's
    kernels, which mostly take no ``interpret`` argument)."""
    from jax.experimental.pallas import tpu as pltpu

    with pltpu.force_tpu_interpret_mode() if force else nullcontext():
        return device_us(fn, args, repeats)


def run_point(family: str, name: str, build: Callable[[], Built], opts: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"family": family, "name": name}
    began = time.monotonic()
    try:
        fn, args = build()
    except Exception as exc:
        return {**row, "error": "build: " + one_line(exc)}
    row.update(modelled(fn, args, opts.chip))
    try:
        row["measured_us"] = measured(
            fn, args, opts.repeats, opts.force and FAMILIES[family].jax_kernel
        )
    except Exception as exc:
        row["error"] = "run: " + one_line(exc)
    if row.get("measured_us") and "modelled_us" in row:
        row["ratio"] = row["modelled_us"] / row["measured_us"]
    row["seconds"] = round(time.monotonic() - began, 1)
    return row


def ranks(xs: list[float]) -> list[float]:
    """1-based ranks, ties given their average rank."""
    first: dict[float, int] = {}
    last: dict[float, int] = {}
    for i, x in enumerate(sorted(xs)):
        first.setdefault(x, i)
        last[x] = i
    return [(first[x] + last[x]) / 2 + 1 for x in xs]


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Pearson's correlation of the ranks; None below 3 points or for a constant side."""
    if len(xs) < 3:
        return None
    try:
        return statistics.correlation(ranks(xs), ranks(ys))
    except statistics.StatisticsError:
        return None


def summary(rows: list[dict[str, Any]], family: str) -> dict[str, Any]:
    mine = [r for r in rows if r["family"] == family]
    both = [r for r in mine if "ratio" in r]
    ratios = [r["ratio"] for r in both]
    return {
        "family": family,
        "points": len(mine),
        "measured": sum("measured_us" in r for r in mine),
        "modelled": sum("modelled_us" in r for r in mine),
        "errors": sum("error" in r for r in mine),
        "skipped": sum("skipped" in r for r in mine),
        "compared": len(both),
        "median_ratio": statistics.median(ratios) if ratios else None,
        "min_ratio": min(ratios, default=None),
        "max_ratio": max(ratios, default=None),
        "within_25": sum(abs(x - 1) <= WITHIN for x in ratios),
        "spearman": spearman([r["modelled_us"] for r in both], [r["measured_us"] for r in both]),
    }


def _f(x: float | None, fmt: str = ".3g") -> str:
    return "–" if x is None else format(x, fmt)


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def family_table(summaries: list[dict[str, Any]]) -> str:
    rows = []
    for s in summaries:
        extra = [f"{s[k]} {k}" for k in ("errors", "skipped") if s[k]]
        points = f"{s['points']} ({', '.join(extra)})" if extra else str(s["points"])
        spread = f"{_f(s['min_ratio'])}–{_f(s['max_ratio'])}" if s["compared"] else "–"
        close = f"{s['within_25']}/{s['compared']}" if s["compared"] else "–"
        row = [s["family"], points, str(s["modelled"]), _f(s["median_ratio"]), spread, close]
        rows.append([*row, _f(s["spearman"], ".2f")])
    headers = ["family", "points", "modelled", "median model/measured", "range"]
    return md_table([*headers, "within ±25 %", "Spearman"], rows)


def point_table(rows: list[dict[str, Any]]) -> str:
    def note(r: dict[str, Any]) -> str:
        parts = [r.get("error"), r.get("partial") and f"partial: {r['partial']}", r.get("skipped")]
        return "; ".join(p for p in parts if p).replace("|", "/")[:200] or r.get("bound", "")

    body = [
        [r["family"], r["name"], _f(r.get("measured_us"), ",.1f"),
         _f(r.get("modelled_us"), ",.1f"), _f(r.get("ratio")), note(r)]
        for r in rows
    ]  # fmt: skip
    headers = ["family", "point", "measured µs", "modelled µs", "model/measured", "bound / note"]
    return md_table(headers, body)


def _one(value: Any) -> str:
    """A field the runs agree on, or (merged runs that differ) their values joined by "/"."""
    return "/".join(map(str, value)) if isinstance(value, list) else str(value)


def _where(run: dict[str, Any], backend: Any) -> str:
    device = run.get("device", {})
    return (
        f"{device.get('device_kind', '?')} ({_one(backend)}), jax {device.get('jax', '?')}, "
        f"libtpu {device.get('libtpu') or '–'}"
    )


def _when(found: dict[str, Any]) -> str:
    """One run's date; merged runs: each one's date and the points it gave (not skipped)."""
    runs = found["provenance"]
    if isinstance(runs, dict):
        return runs.get("date", "?")
    parts = []
    for i, run in enumerate(runs, 1):
        given = [r for r in found["points"] if r.get("run") == i and "skipped" not in r]
        families = ", ".join(dict.fromkeys(r["family"] for r in given)) or "none"
        parts.append(f"{i}: {run.get('date', '?')}, {len(given)} points ({families})")
    return f"merges {len(runs)} runs ({'; '.join(parts)})"


def markdown(found: dict[str, Any]) -> str:
    runs = found["provenance"]
    runs = [runs] if isinstance(runs, dict) else runs
    where = "; ".join(dict.fromkeys(_where(run, found["backend"]) for run in runs))
    head = (
        f"# Cost model vs measured device time, model chip {found['chip']}\n\n"
        f"Measured on {where}, {_when(found)}; median of {_one(found['repeats'])} calls "
        f"(profiler device time); model revision {_one(found['model_revision'])}"
        f"{'; --quick (interpreted: figures meaningless)' if found['quick'] else ''}.\n\n"
    )
    return (
        f"{head}{family_table(found['summary'])}\n\n## Points\n\n{point_table(found['points'])}\n"
    )


def write(out: Path, found: dict[str, Any]) -> None:
    found["summary"] = [summary(found["points"], f) for f in found["families"]]
    stem = f"model_validation_{found['chip']}"
    (out / f"{stem}.json").write_text(json.dumps(found, indent=1, default=str))
    (out / f"{stem}.md").write_text(markdown(found))


def _fail(reason: str) -> Built:
    raise RuntimeError(reason)


def family_points(family: str, quick: bool) -> list[Point]:
    """The family's points; one that cannot even list them is one error point."""
    try:
        return FAMILIES[family].points(quick)
    except Exception as exc:
        return [("(family)", functools.partial(_fail, one_line(exc)))]


def show(row: dict[str, Any]) -> None:
    if "skipped" in row:
        print(f"[{row['family']}] {row['name']}: skipped ({row['skipped']})", flush=True)
        return
    figures = f"measured {_f(row.get('measured_us'), ',.1f')} µs, model "
    figures += f"{_f(row['modelled_us'], ',.1f')} µs" if "modelled_us" in row else "partial"
    tail = row.get("error") or f"ratio {_f(row.get('ratio'))}"
    print(f"[{row['family']}] {row['name']}: {figures}; {tail}"[:240], flush=True)


def _said(row: dict[str, Any]) -> int:
    """How much a point says: skipped 0, an error and no figure 1, a figure 2."""
    if "skipped" in row:
        return 0
    return 2 if "measured_us" in row or "modelled_us" in row else 1


def _agreed(runs: list[dict[str, Any]], key: str) -> Any:
    values = list(dict.fromkeys(run[key] for run in runs))
    return values[0] if len(values) == 1 else values


def merge(paths: list[Path]) -> dict[str, Any]:
    """Earlier runs' ``.json`` as one run's (the module's docstring says which point wins);
    an input that is itself a merge brings its runs, renumbered."""
    runs = [json.loads(path.read_text()) for path in paths]
    for key in ("chip", "quick"):
        if len({run[key] for run in runs}) > 1:
            raise SystemExit(f"--render: the runs differ in {key}: {_agreed(runs, key)}")
    provenances: list[dict[str, Any]] = []
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for path, run in zip(paths, runs, strict=True):
        mine = run["provenance"] if isinstance(run["provenance"], list) else [run["provenance"]]
        offset = len(provenances)
        provenances += [{**p, "input": p.get("input", str(path))} for p in mine]
        for row in run["points"]:
            key = (row["family"], row["name"])
            if key not in best or _said(row) >= _said(best[key]):
                best[key] = {**row, "run": offset + row.get("run", 1)}
    points = list(best.values())
    families = list(dict.fromkeys([f for run in runs for f in run["families"]]))
    families += [f for f in dict.fromkeys(r["family"] for r in points) if f not in families]
    listed = {r["family"] for r in points if r["name"] != "(family)"}
    points = [r for r in points if r["name"] != "(family)" or r["family"] not in listed]
    return {
        "provenance": provenances,
        **{key: _agreed(runs, key) for key in ("chip", "backend", "quick", "repeats")},
        "model_revision": _agreed(runs, "model_revision"),
        "families": families,
        "points": sorted(points, key=lambda r: families.index(r["family"])),
    }


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--chip", default="v5e", choices=list(CHIP_NAMES))
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated")
    parser.add_argument("--deadline", type=float, default=270.0, help="seconds from start")
    parser.add_argument("--repeats", type=int, default=None, help="10; --quick: 3")
    parser.add_argument("--quick", action="store_true", help="tiny shapes, interpreted on CPU")
    parser.add_argument(
        "--render", type=Path, nargs="+", metavar="JSON",
        help="measure nothing: merge these runs' model_validation_<chip>.json into --out",
    )  # fmt: skip
    opts = parser.parse_args()
    opts.repeats = opts.repeats or (3 if opts.quick else 10)
    unknown = set(opts.families.split(",")) - set(FAMILIES)
    if unknown:
        parser.error(f"unknown families {sorted(unknown)}; known: {', '.join(FAMILIES)}")
    # jax's kernels only run interpreted on a CPU; --render needs no backend (the chip may
    # be another process's)
    opts.force = not opts.render and jax.default_backend() == "cpu"
    return opts


def render(paths: list[Path], out: Path) -> int:
    merged = merge(paths)
    write(out, merged)
    print(f"{_when(merged)}\n\n{family_table(merged['summary'])}\n\n{out}")
    return 0


def main() -> int:
    opts = parse()
    start = time.monotonic()
    opts.out.mkdir(parents=True, exist_ok=True)
    if opts.render:
        return render(opts.render, opts.out)
    found: dict[str, Any] = {
        "provenance": {**provenance(), "script": "benchmarks/tpu_model_validation.py"},
        "chip": opts.chip,
        "backend": jax.default_backend(),
        "quick": opts.quick,
        "repeats": opts.repeats,
        "model_revision": MODEL_REVISION,
        "families": opts.families.split(","),
        "points": [],
    }
    for family in found["families"]:
        for name, build in family_points(family, opts.quick):
            if time.monotonic() - start > opts.deadline:
                row = {"family": family, "name": name, "skipped": "deadline"}
            else:
                row = run_point(family, name, build, opts)
            found["points"].append(row)
            show(row)
            write(opts.out, found)  # after every point: a run stopped early keeps them
    write(opts.out, found)
    print(f"\n{family_table(found['summary'])}\n\n{time.monotonic() - start:.0f} s; {opts.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
