"""Tuned configs as data: the run-time lookup a kernel calls (re-exported by ci_bench.spec).

``ci-bench tune --write`` keeps, per kernel version and TPU chip, the winning config of each
case it searched in ``<baselines>/<kernel>_v<version>.tuned.<chip>.json`` (format: tuned
configs version 1, docs/FORMATS.md). A kernel reads it at trace time with
``tuned_config(...)``: this module imports only the standard library and the contract (no
pydantic, no jax), so a kernel pays nothing for it; the public ``ci_bench.spec.tuned_config``
detects the chip (``ci_bench.measure.chip.this_chip``) when the kernel names none. Every
config handed to a kernel passes ``config_problem``, the check ``check-spec`` makes of each
entry (``ci_bench.pipeline.tuned``): a file that is not what the format says, or a value a
kernel must not get (``'x'`` for a block size, NaN, infinity, None, a list, or with the
SPEC's tunables a 0 its constraints or config refuse), is a one-line SpecError, never a
silent default and never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci_bench.contract.spec import SpecError, case_id

if TYPE_CHECKING:
    from ci_bench.contract.tunables import Tunables

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
    except RecursionError:  # nested deeper than the parser's stack: no format nests so
        raise SpecError(f"{path}: not a tuned-configs file: nested too deeply") from None
    except (OSError, ValueError) as exc:  # unreadable, not UTF-8, not JSON, a 5000-digit int
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


def _kind(value: object) -> str | None:
    """A config value's kind (bool before int: ``True`` is an int to Python, not to a
    config); None for anything a config cannot hold (a float, NaN, None, a list)."""
    for kind in (bool, int, str):
        if isinstance(value, kind):
            return kind.__name__
    return None


def config_problem(
    config: object,
    default: Mapping[str, Any],
    tunables: Tunables | None = None,
    params: Mapping[str, int] | None = None,
) -> str | None:
    """Why a tuned ``config`` must not reach the kernel, one line; None when it may. Its
    names are the default's, each value an int, str or bool of its default's kind, and with
    the SPEC's ``tunables`` the case's constraints and the kernel's config type accept it
    (``Tunables.rejects``). ``check-spec`` and the run-time reader both ask this."""
    if not isinstance(config, dict):
        return f"config is {type(config).__name__}, not an object of name -> value"
    if set(config) != set(default):
        return f"config names {sorted(map(str, config))}, the tunables {sorted(default)}"
    for name, value in config.items():
        kind, wanted = _kind(value), _kind(default[name])
        if kind is None:
            return f"config {name}={value!r:.40} is not an int, str or bool"
        if wanted is not None and kind != wanted:
            return (
                f"config {name}={value!r:.40} is a {kind}; its default {default[name]!r} a {wanted}"
            )
    if tunables is not None:
        why = tunables.rejects(config, params or {})
        if why is not None:
            return f"config {why}"
    return None


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
    tunables: Tunables | None = None,
) -> dict[str, Any]:
    """The tuned config of the case (``kernel``, ``params`` in id order, ``dtype``,
    ``mode``) on ``chip``, else ``default``: no chip (off a TPU), no file, or a case the
    file does not hold. A held config is checked as ``check-spec`` checks it
    (``config_problem``; pass the SPEC's ``tunables`` for its constraints and config type
    too): a bad one is a one-line SpecError."""
    name = chip
    if name is None:
        return dict(default)
    path = tuned_path(directory, kernel, version, name)
    try:
        mtime = path.stat().st_mtime_ns
    except FileNotFoundError:
        return dict(default)
    except OSError as exc:
        raise SpecError(f"{path}: tuned configs unreadable: {type(exc).__name__}") from None
    key = case_id(kernel, params, dtype, mode)
    entry = _load(path, mtime).get(key)
    if entry is None:
        return dict(default)
    config = entry.get("config") if isinstance(entry, dict) else None
    if config is None:
        raise SpecError(f"{path}: the entry of {key} has no config")
    problem = config_problem(config, default, tunables, params)
    if problem is not None:
        raise SpecError(f"{path}: {key}: {problem}")
    return {knob: config[knob] for knob in default}
