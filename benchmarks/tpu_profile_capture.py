"""Records what the TPU's compiler says about a Pallas kernel (issue 52): a trace taken with
libtpu's LLO debug info, and libtpu's per-kernel LLO dumps, for a few kernels whose §3.3
metrics differ (the project's matmul at 128³ and 512³ tiles; the GLA forward).

Run from the repository's root on a TPU VM (ci-bench importable), output under OUT:

    python benchmarks/tpu_profile_capture.py --out "$OUT" --work /tmp/cap

Each target runs in a process of its own, because libtpu reads ``LIBTPU_INIT_ARGS`` once,
when jax first opens the chip:
  - with the flags: ``--xla_enable_custom_call_region_trace=true
    --xla_xprof_register_llo_debug_info=true`` (the trace's device plane gains the compiler's
    per-unit utilisation over each kernel's measured windows) and ``--xla_jf_dump_to=DIR
    --xla_jf_dump_llo_text=true`` (per-kernel bundle listings and utilisation tables);
  - without them: the same calls, device time only, to show what the flags cost.
Per target it writes the trace (``.xplane.pb``), ``<target>.structure.json`` (every plane,
line and stat name, the first events of each line, every event of a counters line), the
device plane alone as a text proto (``<target>.device.textproto``: a small fixture that
``jax.profiler.ProfileData.from_text_proto`` reads on any machine) and a manifest of the
dump folder; then packs WORK into OUT/capture.tar.gz (dump files over 4 MB left out,
named in the manifest).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TRACE_FLAGS = "--xla_enable_custom_call_region_trace=true --xla_xprof_register_llo_debug_info=true"
DUMP_FLAGS = "--xla_jf_dump_to={dump} --xla_jf_dump_llo_text=true"
TARGETS = ("matmul-1024-t128", "matmul-1024-t512", "gla-fwd-ci", "gla-bwd-ci")
BIG = 4 << 20


def _stat(ids: dict[str, int], name: str, value: Any) -> str:
    sid = ids.setdefault(name, len(ids) + 1)
    if isinstance(value, bool | int):
        field = f"int64_value: {int(value)}"
    elif isinstance(value, float):
        field = f"double_value: {value!r}"
    elif isinstance(value, bytes):
        field = "bytes_value: " + json.dumps(value.decode("latin-1"))
    else:
        field = "str_value: " + json.dumps(str(value))
    return f"stats {{ metadata_id: {sid} {field} }}"


def text_proto(
    profile: Any, keep_plane: Any, keep_line: Any = None, window: tuple[float, float] | None = None
) -> str:
    """The planes ``keep_plane(name)`` accepts, as an XSpace text proto (names, times and
    stats kept; event metadata reduced to names); only lines ``keep_line(name)`` accepts and
    events that start inside ``window`` (ns), when given."""
    out = []
    for plane in profile.planes:
        if not keep_plane(plane.name):
            continue
        stat_ids: dict[str, int] = {}
        event_ids: dict[str, int] = {}
        body = [f"  name: {json.dumps(plane.name)}"]
        body += ["  " + _stat(stat_ids, k, v) for k, v in plane.stats]
        for n, line in enumerate(plane.lines):
            if keep_line is not None and not keep_line(line.name):
                continue
            events = [
                e for e in line.events if window is None or window[0] <= e.start_ns <= window[1]
            ]
            base = int(min((e.start_ns for e in events), default=0.0))
            rows = [f"    id: {n + 1}", f"    name: {json.dumps(line.name)}"]
            rows.append(f"    timestamp_ns: {base}")
            for e in events:
                eid = event_ids.setdefault(e.name, len(event_ids) + 1)
                stats = " ".join(_stat(stat_ids, k, v) for k, v in e.stats)
                offset = round((e.start_ns - base) * 1000)
                duration = round(e.duration_ns * 1000)
                rows.append(
                    f"    events {{ metadata_id: {eid} offset_ps: {offset} "
                    f"duration_ps: {duration} {stats} }}"
                )
            body.append("  lines {\n" + "\n".join(rows) + "\n  }")
        for kind, ids in (("event_metadata", event_ids), ("stat_metadata", stat_ids)):
            for name, i in ids.items():
                entry = f"{{ key: {i} value {{ id: {i} name: {json.dumps(name)} }} }}"
                body.append(f"  {kind} {entry}")
        out.append("planes {\n" + "\n".join(body) + "\n}")
    return "\n".join(out) + "\n"


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("latin-1")[:200]
    if isinstance(value, str):
        return value[:400]
    return value


def structure(profile: Any) -> dict[str, Any]:
    """Every plane and line with its event count and stat names; the first events of each
    line and every event of a line whose name says counters."""
    planes = []
    for plane in profile.planes:
        lines = []
        for line in plane.lines:
            events = list(line.events)
            names = sorted({k for e in events for k, _ in e.stats})
            keep = events if "counter" in line.name.lower() else events[:12]
            lines.append(
                {
                    "name": line.name,
                    "events": len(events),
                    "event_names": sorted({e.name for e in events})[:60],
                    "stat_names": names,
                    "sample": [
                        {
                            "name": e.name,
                            "start_ns": e.start_ns,
                            "duration_ns": e.duration_ns,
                            "stats": [[k, _plain(v)] for k, v in e.stats],
                        }
                        for e in keep[:400]
                    ],
                }
            )
        planes.append(
            {
                "name": plane.name,
                "stats": [[k, _plain(v)] for k, v in plane.stats],
                "lines": lines,
            }
        )
    return {"planes": planes}


def workload(target: str) -> tuple[Any, tuple[Any, ...]]:
    """The function and inputs one target runs."""
    import jax

    from ci_bench.contract.matrix import find_case
    from ci_bench.measure.modes import concrete_workload

    if target.startswith("matmul-"):
        from kernels.matmul import BlockSizes, tiled

        size, tile = (int(x) for x in target.removeprefix("matmul-").split("-t"))
        ka, kb = jax.random.split(jax.random.PRNGKey(0))
        a = jax.random.normal(ka, (size, size), jax.numpy.bfloat16)
        b = jax.random.normal(kb, (size, size), jax.numpy.bfloat16)
        return tiled(BlockSizes(tile, tile, tile)), (a, b)
    from kernels.gla import SPEC

    case_id = "gla/B1-T1024-H4-K64-V64/bfloat16"
    if target == "gla-bwd-ci":
        case_id += "/backward"
    work = concrete_workload(SPEC, find_case(SPEC, case_id))
    return work.fn, tuple(work.args)


def child(target: str, folder: Path, flagged: bool) -> None:
    """One target in this process: warm up, trace three calls, describe the trace."""
    import jax
    from jax.profiler import ProfileData

    from ci_bench.measure.profiling import capture_trace
    from ci_bench.measure.timers import executions_in

    fn, args = workload(target)
    label = f"{target}.{'flags' if flagged else 'plain'}"
    info = capture_trace(fn, args, folder / f"trace-{label}", runs=3)
    profile = ProfileData.from_file(str(info.xplane_files[0]))
    modules = [(e.module, e.device_ns) for e in executions_in(profile)]
    summary = {"target": target, "flagged": flagged, "modules": modules}
    summary["xplane_bytes"] = info.xplane_files[0].stat().st_size
    summary["devices"] = [str(d) for d in jax.devices()]
    (folder / f"{label}.summary.json").write_text(json.dumps(summary, indent=1))
    if flagged:
        (folder / f"{label}.structure.json").write_text(json.dumps(structure(profile), indent=1))
        device = text_proto(profile, lambda name: name.startswith("/device:TPU:0"))
        (folder / f"{target}.device.textproto").write_text(device)
    print(json.dumps(summary), flush=True)


# What the committed fixtures keep of a capture (tests/fixtures/tpu_v5e/README.md): the
# device plane's XLA Modules, XLA Ops and counters lines over the first call, and of the
# kernel's dump files the lines the reader uses.
FIXTURE_LINES = ("XLA Modules", "XLA Ops", "_counters_")
FIXTURE_DUMPS = {
    "schedule-analysis_final_bundles": lambda line: "total scheduled bundles" in line,
    "register-pressure": lambda line: line.startswith("Register pressure"),
    "final_bundles": lambda line: "= dma." in line,
}


def trim(work: Path, dest: Path, target: str, kernel: str) -> None:
    """``target``'s capture cut down to a fixture: the trace's first call (device plane,
    ``FIXTURE_LINES``) as a gzipped text proto; ``kernel``'s dump files, their used lines."""
    import gzip

    from jax.profiler import ProfileData

    from ci_bench.measure.unit_metrics import _DUMP_FILE

    trace = next((work / f"trace-{target}.flags").rglob("*.xplane.pb"), None)
    text = (work / f"{target}.device.textproto").read_text() if trace is None else None
    profile = ProfileData.from_file(str(trace)) if trace else ProfileData.from_text_proto(text)
    first = min(
        (e.start_ns, e.start_ns + e.duration_ns)
        for p in profile.planes
        if p.name.startswith("/device:TPU:0")
        for line in p.lines
        if line.name == "XLA Modules"
        for e in line.events
    )
    proto = text_proto(
        profile, lambda n: n.startswith("/device:TPU:0"), lambda n: n in FIXTURE_LINES, first
    )
    dest.mkdir(parents=True, exist_ok=True)
    with gzip.open(dest / f"{target}.trace.textproto.gz", "wt", compresslevel=9) as f:
        f.write(proto)
    dumps = dest / f"{target}.llo"
    dumps.mkdir(exist_ok=True)
    stamps: dict[str, list[Path]] = {}
    for path in (work / f"dump-{target}").iterdir():
        found = _DUMP_FILE.match(path.name)
        if found and found.group(2) == kernel and found.group(4) in FIXTURE_DUMPS:
            stamps.setdefault(found.group(1), []).append(path)
    for path in stamps[max(stamps, key=int)]:
        keep = FIXTURE_DUMPS[_DUMP_FILE.match(path.name).group(4)]  # type: ignore[union-attr]
        lines = [line for line in path.read_text().splitlines() if keep(line)]
        (dumps / path.name).write_text("\n".join(lines) + "\n")


def manifest(dump: Path) -> list[list[Any]]:
    return sorted(
        [str(p.relative_to(dump)), p.stat().st_size] for p in dump.rglob("*") if p.is_file()
    )


def pack(work: Path, out: Path) -> None:
    with tarfile.open(out / "capture.tar.gz.part", "w:gz") as tar:
        for path in sorted(work.rglob("*")):
            if path.is_file() and path.stat().st_size <= BIG:
                tar.add(path, arcname=str(path.relative_to(work)))
    (out / "capture.tar.gz.part").replace(out / "capture.tar.gz")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--deadline", type=float, default=500.0, help="seconds for the whole")
    parser.add_argument(
        "--trim", nargs=2, metavar=("TARGET", "KERNEL"), help="cut WORK's TARGET to OUT"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--flagged", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.work, args.flagged)
        return 0
    if args.trim:
        trim(args.work, args.out, *args.trim)
        return 0
    start = time.monotonic()
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    log = (args.out / "log.txt").open("a")
    for target in args.targets.split(","):
        for flagged in (True, False):
            env = dict(os.environ, PYTHONPATH=f"{ROOT}:{os.environ.get('PYTHONPATH', '')}")
            dump = args.work / f"dump-{target}"
            if flagged:
                env["LIBTPU_INIT_ARGS"] = f"{TRACE_FLAGS} {DUMP_FLAGS.format(dump=dump)}"
            left = args.deadline - (time.monotonic() - start)
            if left < 20:
                log.write(f"{target} flagged={flagged}: skipped (deadline)\n")
                continue
            cmd = [sys.executable, __file__, "--out", str(args.out), "--work", str(args.work)]
            cmd += ["--child", target] + (["--flagged"] if flagged else [])
            began = time.monotonic()
            try:
                done = subprocess.run(
                    cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=left
                )
                rc, text = done.returncode, done.stdout + done.stderr
            except subprocess.TimeoutExpired as exc:
                rc, text = "timeout", str(exc.stdout or "") + str(exc.stderr or "")
            seconds = time.monotonic() - began
            log.write(f"== {target} flagged={flagged} rc={rc} {seconds:.1f}s\n{text[-6000:]}\n")
            log.flush()
            if flagged and dump.is_dir():
                (args.work / f"{target}.dump-manifest.json").write_text(
                    json.dumps(manifest(dump), indent=0)
                )
            pack(args.work, args.out)
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
