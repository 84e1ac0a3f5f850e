"""Tuned configs as data: the run-time lookup a kernel calls (re-exported by ci_bench.spec).

``ci-bench tune --write`` keeps, per kernel version and TPU chip, the winning config of each
case it searched in ``<baselines>/<kernel>_v<version>.tuned.<chip>.json`` (format: tuned
configs version 1, docs/FORMATS.md). A kernel reads it at trace time with
``tuned_config(...)``: this module imports only the standard library and the contract (no
pydantic, no jax), so a kernel pays nothing for it; the public ``ci_bench.spec.tuned_config``
detects the chip (``ci_bench.measure.chip.this_chip``) when the kernel names none. The
file's full validation is ``check-spec``'s (``ci_bench.schema.tuned``); here a file that is
not what the format says is a one-line SpecError, never a silent default.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from ci_bench.contract.spec import SpecError, case_id

TUNED_FORMAT = "ci-bench-tuned"
TUNED_VERSION = 1
MAX_TUNED_BYTES = 16 * 1024 * 1024


def tuned_path(directory: str | Path, kernel: str, version: str, chip: str) -> Path:
    """``<directory>/<kernel>_v<version>.tuned.<chip>.json``."""
    return Path(directory) / f"{kernel}_v{version}.tuned.{chip}.json"


@cache
def _load(path: Path, mtime_ns: int) -> Mapping[str, Any]:
    """The file's cases by id (cached per path and modification time)."""
    del mtime_ns  # part of the cache key only: an edited file is read again
    if path.stat().st_size > MAX_TUNED_BYTES:
        raise SpecError(f"{path}: tuned configs larger than {MAX_TUNED_BYTES} bytes")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(f"{path}: not a tuned-configs file: {type(exc).__name__}") from None
    if not isinstance(data, dict) or data.get("format") != TUNED_FORMAT:
        raise SpecError(f"{path}: not a tuned-configs file (format {TUNED_FORMAT!r} expected)")
    if data.get("schema_version") != TUNED_VERSION:
        raise SpecError(
            f"{path}: tuned configs version {data.get('schema_version')!r}; this ci-bench "
            f"reads version {TUNED_VERSION}"
        )
    cases = data.get("cases")
    if not isinstance(cases, dict):
        raise SpecError(f"{path}: 'cases' must be an object of case id -> entry")
    return cases


def tuned_config(
    kernel: str,
    version: str,
    params: Mapping[str, int],
    dtype: str,
    *,
    directory: str | Path,
    default: Mapping[str, Any],
    mode: str = "forward",
    chip: str | None = None,
) -> dict[str, Any]:
    """The tuned config of the case (``kernel``, ``params`` in id order, ``dtype``,
    ``mode``) on ``chip``, else ``default``: no chip (off a TPU), no file, or a case the
    file does not hold. The values are the tuned ones for the default's keys; a key the
    file lacks keeps its default."""
    name = chip
    if name is None:
        return dict(default)
    path = tuned_path(directory, kernel, version, name)
    try:
        mtime = path.stat().st_mtime_ns
    except FileNotFoundError:
        return dict(default)
    entry = _load(path, mtime).get(case_id(kernel, params, dtype, mode))
    if entry is None:
        return dict(default)
    config = entry.get("config") if isinstance(entry, dict) else None
    if not isinstance(config, dict):
        raise SpecError(
            f"{path}: the entry of {case_id(kernel, params, dtype, mode)} has no config"
        )
    return {key: config.get(key, value) for key, value in default.items()}
