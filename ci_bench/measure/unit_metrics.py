"""The specification's section 3.3 metrics for a TPU kernel, read without xprof.

Two sources, both written by libtpu when a process starts with ``TRACE_FLAGS`` and
``DUMP_FLAGS`` in ``LIBTPU_INIT_ARGS`` (read once, when jax opens the chip):

- the trace: the device plane gains a ``_counters_`` line whose events hold, for each region
  of a kernel's code as it ran, the compiler's share of bundle slots each unit is busy in
  (``% util`` for MXU, Scalar ALU, ...) and the kernel's count of vector spills and fills.
  They are compiler estimates laid over measured windows, not hardware counters: a unit's
  figure here is its occupancy weighted by the time each region actually took;
- the LLO dumps: per kernel, the final bundles (its DMA instructions), the bundle count and
  the register pressure.

Pure, apart from reading the files it is given: ``read_trace`` takes any object shaped like
``jax.profiler.ProfileData`` (planes, lines, events with ``start_ns``, ``duration_ns`` and
``stats``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ci_bench.schema.unit_metrics import UNITS, KernelUnitMetrics, OutsideKernels

TRACE_FLAGS = (
    "--xla_enable_custom_call_region_trace=true",
    "--xla_xprof_register_llo_debug_info=true",
)
DUMP_FLAGS = ("--xla_jf_dump_to={folder}", "--xla_jf_dump_llo_text=true")
COUNTS = {"Vector Spills": "spills", "Vector Fills": "fills"}
PALLAS_TARGET = 'custom_call_target="tpu_custom_call"'
_OP_NAME = re.compile(r"^%?([\w.\-]+) = ")
_DUMP_FILE = re.compile(r"^(\d+)-(.+?)-(\d+)-([\w\-]+)\.txt$")
_DMA = re.compile(r"= dma\.([a-z_]+(?:\.[a-z_]+)*)")
_COMMENT = re.compile(r"/\*.*?\*/")  # a bounds check's comment names the DMA it guards
_BUNDLES = re.compile(r"total scheduled bundles:\s*(\d+)")
_PRESSURE = re.compile(r"Register pressure for vregs is (\d+)")


def libtpu_args(existing: str, dump_folder: Path | None) -> str:
    """``LIBTPU_INIT_ARGS`` with the trace flags (and the dump flags, given a folder)
    added after what the user already set."""
    flags = list(TRACE_FLAGS)
    if dump_folder is not None:
        flags += [f.format(folder=dump_folder) for f in DUMP_FLAGS]
    return " ".join([existing.strip(), *flags]).strip()


def op_name(event_name: str) -> str:
    """``%matmul_tiled.1 = bf16[...] custom-call(...)`` -> ``matmul_tiled.1``."""
    found = _OP_NAME.match(event_name)
    return found.group(1) if found else event_name.split(" ", 1)[0].lstrip("%")


def _overlap(start: float, end: float, windows: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(end, w_end) - max(start, w_start)) for w_start, w_end in windows)


def _union(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _device_lines(profile: Any) -> Iterable[tuple[str, Any]]:
    for plane in profile.planes:
        if plane.name.startswith("/device:TPU:"):
            for line in plane.lines:
                yield plane.name, line


def read_trace(profile: Any) -> list[KernelUnitMetrics]:
    """Each Pallas kernel's metrics, from the first TPU device plane that ran one; empty
    when the trace has no Pallas kernel on a TPU, or no counters (taken without
    ``TRACE_FLAGS``): ``has_counters`` tells the two apart."""
    windows: dict[str, list[tuple[float, float]]] = {}
    counters: dict[str, list[tuple[str, float, float, str, float]]] = {}
    chosen: str | None = None
    for plane, line in _device_lines(profile):
        if chosen is not None and plane != chosen:
            continue
        if line.name == "XLA Ops":
            for event in line.events:
                if PALLAS_TARGET in event.name:
                    chosen = plane
                    end = event.start_ns + event.duration_ns
                    windows.setdefault(op_name(event.name), []).append((event.start_ns, end))
        elif line.name == "_counters_":
            found = counters.setdefault(plane, [])  # each chip's own: never mixed
            for event in line.events:
                for key, value in event.stats:
                    if key in ("% util", "spills", "fills"):
                        end = event.start_ns + event.duration_ns
                        found.append((event.name, event.start_ns, end, key, float(value)))
    mine = counters.get(chosen, []) if chosen is not None else []
    return [_kernel(name, spans, mine) for name, spans in windows.items()]


def _kernel(
    name: str,
    spans: list[tuple[float, float]],
    counters: list[tuple[str, float, float, str, float]],
) -> KernelUnitMetrics:
    total = sum(end - start for start, end in spans)
    weighted = dict.fromkeys(UNITS, 0.0)
    counts: dict[str, float] = {}
    covering: list[tuple[float, float]] = []
    for unit, start, end, key, value in counters:
        if end < spans[0][0] or start > spans[-1][1]:
            continue
        inside = _overlap(start, end, spans)
        touches = inside > 0 or any(s <= start <= e for s, e in spans)
        if not touches:
            continue
        if key == "% util" and unit in weighted:
            weighted[unit] += value * inside
            if inside > 0:
                covering.append((max(start, spans[0][0]), min(end, spans[-1][1])))
        elif unit in COUNTS:
            counts[COUNTS[unit]] = max(counts.get(COUNTS[unit], 0.0), value)
    covered = sum(_overlap(s, e, spans) for s, e in _union(covering))
    utilisation = {u: (w / total if total else 0.0) for u, w in weighted.items()}
    spills, fills = counts.get("spills"), counts.get("fills")
    return KernelUnitMetrics(
        kernel=name,
        calls=len(spans),
        device_us=round(total / 1e3 / len(spans), 3),
        covered=round(min(1.0, covered / total) if total else 0.0, 4),
        utilisation={u: round(v, 2) for u, v in utilisation.items()} if covering else {},
        spills=None if spills is None else int(spills),
        fills=None if fills is None else int(fills),
    )


def _kind(event_name: str) -> str:
    """``%copy.2 = f32[...] copy(...)`` -> ``copy``; ``copy-start.1`` -> ``copy-start``."""
    return re.sub(r"\.\d+$", "", op_name(event_name))


def read_outside(profile: Any) -> OutsideKernels | None:
    """What ran beside the Pallas kernels on the first TPU device plane that ran one (the
    plane ``read_trace`` reads); None when no Pallas kernel ran on a TPU."""
    chosen = next(
        (
            plane
            for plane, line in _device_lines(profile)
            if line.name == "XLA Ops" and any(PALLAS_TARGET in e.name for e in line.events)
        ),
        None,
    )
    if chosen is None:
        return None
    module_ns = 0.0
    kernels: dict[str, int] = {}  # each Pallas kernel's calls
    ops: dict[str, list[float]] = {}  # each other kind's count and nanoseconds
    for plane, line in _device_lines(profile):
        if plane != chosen:
            continue
        if line.name == "XLA Modules":
            module_ns += sum(e.duration_ns for e in line.events)
        elif line.name == "XLA Ops":
            for event in line.events:
                if PALLAS_TARGET in event.name:
                    kernels[op_name(event.name)] = kernels.get(op_name(event.name), 0) + 1
                    continue
                tally = ops.setdefault(_kind(event.name), [0, 0.0])
                tally[0] += 1
                tally[1] += event.duration_ns
    calls = max(kernels.values())
    per_call = {kind: (n / calls, ns / calls / 1e3) for kind, (n, ns) in sorted(ops.items())}
    return OutsideKernels(calls, module_ns / calls / 1e3, per_call)


def has_counters(profile: Any) -> bool:
    """Whether the trace was taken with ``TRACE_FLAGS`` (its device plane has counters)."""
    return any(
        line.name == "_counters_" and any(k == "% util" for e in line.events for k, _ in e.stats)
        for _, line in _device_lines(profile)
    )


def metric_env(env: Mapping[str, str], dump_folder: Path) -> dict[str, str]:
    """A metric worker's environment: the flags after the user's, and no persistent
    compilation cache (a cache hit compiles nothing, so libtpu would dump nothing)."""
    flags = libtpu_args(env.get("LIBTPU_INIT_ARGS", ""), dump_folder)
    return {**env, "LIBTPU_INIT_ARGS": flags, "JAX_ENABLE_COMPILATION_CACHE": "false"}


@dataclass(frozen=True)
class DumpFacts:
    """What one kernel's LLO dump says about its code (static: not per call)."""

    bundles: int | None
    register_pressure: int | None
    dma: Mapping[str, int]


def read_dumps(folder: Path, kernels: Iterable[str]) -> dict[str, DumpFacts]:
    """For each kernel name found in ``folder`` (libtpu's ``--xla_jf_dump_to``), its
    latest compilation's facts. File names: ``<stamp>-<op name>-<pass no>-<pass>.txt``."""
    wanted = set(kernels)
    latest: dict[str, tuple[int, dict[str, Path]]] = {}
    if not folder.is_dir():
        return {}
    for path in folder.iterdir():
        found = _DUMP_FILE.match(path.name)
        if not found or found.group(2) not in wanted:
            continue
        stamp, name, stage = int(found.group(1)), found.group(2), found.group(4)
        if name not in latest or stamp > latest[name][0]:
            latest[name] = (stamp, {})
        if latest[name][0] == stamp:
            latest[name][1][stage] = path
    return {name: dump_facts(files) for name, (_, files) in latest.items()}


def _read(path: Path | None) -> str:
    return path.read_text(errors="replace") if path is not None else ""


def dump_facts(files: Mapping[str, Path]) -> DumpFacts:
    """The bundle count, register pressure and DMA instructions of one kernel's dump set
    (stage name -> file)."""
    bundles = _BUNDLES.search(_read(files.get("schedule-analysis_final_bundles")))
    pressure = _PRESSURE.search(_read(files.get("register-pressure")))
    dma: dict[str, int] = {}
    for kind in _DMA.findall(_COMMENT.sub("", _read(files.get("final_bundles")))):
        dma[kind] = dma.get(kind, 0) + 1
    return DumpFacts(
        bundles=int(bundles.group(1)) if bundles else None,
        register_pressure=int(pressure.group(1)) if pressure else None,
        dma=dict(sorted(dma.items())),
    )


def with_dumps(
    metrics: Iterable[KernelUnitMetrics], facts: Mapping[str, DumpFacts]
) -> list[KernelUnitMetrics]:
    """The trace's metrics with each kernel's dump facts added where the dump has it."""
    out = []
    for m in metrics:
        f = facts.get(m.kernel)
        update = {"bundles": f.bundles, "register_pressure": f.register_pressure}
        out.append(m if f is None else m.model_copy(update={**update, "dma": dict(f.dma)}))
    return out
