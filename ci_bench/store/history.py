"""The history store: JSON Lines of ``HistoryRecord``, one file per device identity.

Pure functions turn results and baseline files into records and merge a record into a
file's text (idempotent per commit, device and source; retention keeps the newest N per
device). ``load_local`` / ``append_local`` are the folder edge; the data-branch edge is
``ci_bench.github.history`` (store never imports github).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from ci_bench.errors import InputError
from ci_bench.schema.baseline import BaselineFile
from ci_bench.schema.history import (
    HISTORY_READABLE,
    AcceptanceRecord,
    CasePoint,
    DeviceRef,
    HistoryRecord,
    Source,
)
from ci_bench.schema.results import (
    RESULTS_READABLE,
    CaseResult,
    DeviceFingerprint,
    Results,
)
from ci_bench.schema.verdicts import Verdict
from ci_bench.store.baselines import baseline_files, load_baseline
from ci_bench.store.files import (
    json_lines,
    read_json,
    read_text,
    validate_model,
    validation_message,
    write_text,
)

DATA_BRANCH = "ci-bench-data"
DEFAULT_KEEP = 500  # records per device
# The contents API returns a file's content inline only up to 1 MB: the oldest records go
# first past this size, whatever ``keep`` says, so the data branch can always be read back.
MAX_FILE_BYTES = 900_000


def quartiles(samples: Sequence[float]) -> tuple[float, float]:
    """First and third quartiles (inclusive method: within the samples' range)."""
    if len(samples) < 2:
        return samples[0], samples[0]
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return q1, q3


def _r(value: float | None) -> float | None:
    """Six significant digits: far below timing noise, and half the bytes of a float repr."""
    return None if value is None else float(f"{value:.6g}")


def point_from_case(case: CaseResult, verdict: Verdict | None = None) -> CasePoint:
    base = {
        "id": case.id,
        "kernel": case.kernel,
        "version": case.version,
        "dtype": case.dtype,
        "shape": case.shape,
        "status": case.status,
        "verdict": verdict,
        "peak_bytes": case.peak_bytes,
    }
    if case.status != "ok" or case.pallas is None:
        return CasePoint(**base)
    stats = case.pallas
    q1, q3 = quartiles(stats.samples_ms)
    metrics = case.metrics
    return CasePoint(
        **base,
        median_ms=_r(stats.median_ms),
        mean_ms=_r(stats.mean_ms),
        min_ms=_r(stats.min_ms),
        q1_ms=_r(q1),
        q3_ms=_r(q3),
        repeats=stats.repeats,
        tflops=_r(case.tflops),
        mfu=_r(metrics.mfu) if metrics else None,
        hbm_utilization=_r(metrics.hbm_utilization) if metrics else None,
        arithmetic_intensity=_r(metrics.arithmetic_intensity) if metrics else None,
        bound=metrics.bound if metrics else None,
    )


def device_ref(device: DeviceFingerprint) -> DeviceRef:
    return DeviceRef(
        identity=device.identity,
        platform=device.platform,
        device_kind=device.device_kind,
        software=device.software,
    )


def _peaks(cases: Iterable[CaseResult]) -> tuple[float | None, float | None]:
    for case in cases:
        if case.metrics and (case.metrics.peak_tflops or case.metrics.peak_gbps):
            return case.metrics.peak_tflops, case.metrics.peak_gbps
    return None, None


def _timer(results: Results) -> str | None:
    """The timer, where the results format records one (newer formats may)."""
    for holder in (results.meta.settings, results.meta):
        value = getattr(holder, "timer", None)
        if isinstance(value, str):
            return value
    return None


def record_from_results(
    results: Results,
    *,
    source: Source = "run",
    verdicts: Mapping[str, Verdict] | None = None,
    pr: int | None = None,
    tag: str | None = None,
    origin: str = "results",
    acceptance: AcceptanceRecord | None = None,
) -> HistoryRecord:
    """The record of one run; a run without a git commit cannot be placed in a history."""
    meta = results.meta
    if not meta.git.commit:
        raise InputError(f"{origin}: meta.git.commit: no commit recorded; history needs one")
    verdicts = verdicts or {}
    peak_tflops, peak_gbps = _peaks(results.cases)
    return _record(
        origin,
        commit=meta.git.commit,
        time=meta.started_at,
        source=source,
        ref=meta.git.ref,
        tag=tag,
        pr=pr,
        profile=meta.profile,
        tool_version=meta.tool_version,
        device=device_ref(meta.device),
        timer=_timer(results),
        peak_tflops=peak_tflops,
        peak_gbps=peak_gbps,
        kernels=dict(meta.kernels),
        cases=[point_from_case(c, verdicts.get(c.id)) for c in results.cases],
        acceptance=acceptance,
    )


def _record(origin: str, **fields: object) -> HistoryRecord:
    """A record from a results or baseline file's values, which the record's own rules may
    refuse (a commit with spaces): an input error naming the file, never a crash."""
    try:
        return HistoryRecord.model_validate(fields)
    except ValidationError as exc:
        raise InputError(
            f"{origin}: cannot be a history record: {validation_message(exc)}"
        ) from None


def records_from_baseline(doc: BaselineFile, origin: str = "baseline") -> list[HistoryRecord]:
    """One record per device entry; an entry without commit or tag has no place in time."""
    records = []
    for entry in doc.entries:
        prov = entry.provenance
        commit = prov.commit or prov.tag
        if not commit:
            continue
        peak_tflops, peak_gbps = _peaks(entry.cases)
        records.append(
            _record(
                origin,
                commit=commit,
                time=prov.measured_at,
                source="baseline",
                ref=prov.ref,
                tag=prov.tag,
                profile=prov.profile,
                tool_version=prov.tool_version,
                device=device_ref(entry.device),
                peak_tflops=peak_tflops,
                peak_gbps=peak_gbps,
                kernels={doc.kernel: doc.version},
                cases=[point_from_case(c) for c in entry.cases],
            )
        )
    return records


# -- the JSON Lines file -------------------------------------------------------------------


def device_file(identity: str) -> str:
    """A file name per device identity, e.g. ``tpu-TPU-v5-lite.jsonl``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", identity).strip("-.") + ".jsonl"


def parse_jsonl(text: str, origin: str) -> list[HistoryRecord]:
    """Every line a record, read under the same rules as every other file (depth, finite
    numbers, Unicode); a bad line is an InputError naming file, line and field."""
    return [
        validate_model(
            value,
            HistoryRecord,
            source=where,
            what="history record",
            schema_version=HISTORY_READABLE,
        )
        for where, value in json_lines(text, origin, "history record")
    ]


def render_jsonl(records: Iterable[HistoryRecord]) -> str:
    return "".join(r.model_dump_json(exclude_none=True) + "\n" for r in records)


def merge_record(
    existing: Sequence[HistoryRecord], record: HistoryRecord, keep: int = DEFAULT_KEEP
) -> list[HistoryRecord] | None:
    """The file's records with ``record`` added, oldest first, the newest ``keep`` per
    device kept; None when a record with the same key is already there (a re-run)."""
    if keep < 1:
        raise InputError(f"--keep: must be at least 1, got {keep}")
    if any(r.key == record.key for r in existing):
        return None
    merged = sorted([*existing, record], key=lambda r: r.time)
    kept: list[HistoryRecord] = []
    counts: dict[str, int] = {}
    for r in reversed(merged):
        counts[r.device.identity] = counts.get(r.device.identity, 0) + 1
        if counts[r.device.identity] <= keep:
            kept.append(r)
    return kept[::-1]


def merge_text(
    text: str | None,
    record: HistoryRecord,
    keep: int,
    origin: str,
    max_bytes: int = MAX_FILE_BYTES,
) -> str | None:
    """``merge_record`` on a file's text: the contents-API merge function."""
    existing = parse_jsonl(text, origin) if text else []
    merged = merge_record(existing, record, keep)
    if merged is None:
        return None
    lines = [r.model_dump_json(exclude_none=True) + "\n" for r in merged]
    size = sum(len(line.encode()) for line in lines)
    while len(lines) > 1 and size > max_bytes:
        size -= len(lines.pop(0).encode())
    return "".join(lines)


# -- the folder edge -----------------------------------------------------------------------


def append_local(
    folder: Path, record: HistoryRecord, keep: int = DEFAULT_KEEP
) -> tuple[Literal["written", "unchanged"], Path]:
    path = folder / device_file(record.device.identity)
    text = read_text(path, "history") if path.exists() or path.is_symlink() else None
    new = merge_text(text, record, keep, str(path))
    if new is None:
        return "unchanged", path
    # The store is read, merged and written back: replacing its file is the point.
    write_text(path, new, what="history", replace=True)
    return "written", path


def _load_json(path: Path) -> list[HistoryRecord]:
    """A results file or a baseline file, told apart by their top-level keys."""
    data = read_json(path, "results or baseline")
    if isinstance(data, dict) and "entries" in data:
        return records_from_baseline(load_baseline(path), str(path))
    results = validate_model(
        data, Results, source=str(path), what="results", schema_version=RESULTS_READABLE
    )
    return [record_from_results(results, origin=str(path))]


def load_local(
    history: Sequence[Path] = (),
    results: Sequence[Path] = (),
    baselines_dir: Path | None = None,
) -> list[HistoryRecord]:
    """Records from history folders (``*.jsonl``, and results or baseline ``*.json``),
    results files and a baseline folder; a missing folder or file is an input error."""
    records: list[HistoryRecord] = []
    for folder in history:
        if not folder.is_dir():
            raise InputError(f"{folder}: history folder not found")
        for path in sorted(folder.glob("*.jsonl")):
            records += parse_jsonl(read_text(path, "history"), str(path))
        for path in sorted(folder.glob("*.json")):
            records += _load_json(path)
    for path in results:
        records += _load_json(path)
    if baselines_dir is not None and baselines_dir.is_dir():
        for path in baseline_files(baselines_dir):  # never the tuned configs beside them
            records += records_from_baseline(load_baseline(path), str(path))
    return records
