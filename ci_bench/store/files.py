"""File edge: atomic writes and validated reads that fail with one line naming file and field.

A file read here is untrusted (an artifact from pull-request code, a hand-edited baseline):
it is bounded in size and nesting, must be UTF-8, and may hold finite numbers only, before
pydantic sees it.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ci_bench.errors import InputError

M = TypeVar("M", bound=BaseModel)

# A full-profile results file with raw samples is a few MB; 64 MB is far beyond any real one.
MAX_FILE_BYTES = 64 * 1024 * 1024
# Results nest about 6 deep; JSON deeper than this is hostile, and Python's parser would
# hit its recursion limit (a RecursionError, not a message) long before pydantic could.
MAX_DEPTH = 64


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder and rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def dump_model(model: BaseModel) -> str:
    return model.model_dump_json(indent=2, exclude_none=False) + "\n"


def validation_message(exc: ValidationError) -> str:
    """First pydantic error as ``field.path: message``, on one line."""
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    return " ".join(f"{where}: {err['msg']}".split())


def too_deep(value: Any, limit: int) -> bool:
    """Whether a parsed JSON value nests deeper than ``limit``; iterative, never recursing."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        )
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


def non_finite(value: object) -> str | None:
    """The dotted path of the first NaN or infinity in a JSON-like value, iteratively."""
    stack: list[tuple[object, str]] = [(value, "")]
    while stack:
        item, at = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return at or "(top level)"
        if isinstance(item, dict):
            stack.extend((v, f"{at}.{k}" if at else str(k)) for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{at}.{i}" if at else str(i)) for i, v in enumerate(item))
    return None


def parse_json(data: bytes, source: str, what: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Bytes -> JSON value, refusing what is not UTF-8, too deep or not finite (one line)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: {what} is not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise InputError(f"{source}: {what} file is empty")
    deep = f"{source}: {what} is nested deeper than {max_depth} levels"
    try:
        # NaN, Infinity and overflowing literals (1e999) parse to non-finite floats, found
        # below with the field's path: a results file holds finite numbers only.
        value = json.loads(text)
    except ValueError as exc:  # JSONDecodeError included
        raise InputError(f"{source}: invalid JSON: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise InputError(deep) from None
    if too_deep(value, max_depth):
        raise InputError(deep)
    bad = non_finite(value)
    if bad:
        raise InputError(f"{source}: {bad[:200]}: not a finite number")
    return value


def read_bytes(path: Path, what: str, *, limit: int | None = None) -> bytes:
    """A regular file's bytes, at most ``limit``; every failure names the file."""
    limit = MAX_FILE_BYTES if limit is None else limit
    try:
        if not path.is_file():
            if not path.exists() and not path.is_symlink():
                raise InputError(f"{path}: {what} file not found")
            raise InputError(f"{path}: {what} file is not a regular file")
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what} file: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputError(f"{path}: {what} file is larger than {limit} bytes")
    return data


def read_json(path: Path, what: str) -> Any:
    return parse_json(read_bytes(path, what), str(path), what)


def read_model(
    path: Path, model: type[M], *, what: str, schema_version: int | tuple[int, ...] | None
) -> M:
    """Load and validate a JSON file; every failure is an InputError naming the file and field."""
    data = read_json(path, what)
    if not isinstance(data, dict):
        raise InputError(f"{path}: {what} must be a JSON object, got {type(data).__name__}")
    if schema_version is not None:
        readable = schema_version if isinstance(schema_version, tuple) else (schema_version,)
        found = data.get("schema_version")
        if found not in readable or isinstance(found, bool):
            hint = (
                "written by a newer ci-bench; upgrade ci-bench"
                if isinstance(found, int) and found > max(readable)
                else "re-run or migrate it (docs/FORMATS.md)"
            )
            versions = ", ".join(str(v) for v in readable)
            raise InputError(
                f"{path}: schema_version: {repr(found)[:40]} is not supported (this ci-bench "
                f"reads {versions}; {hint})"
            )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{path}: {validation_message(exc)}") from None
    except RecursionError:
        raise InputError(f"{path}: {what} is nested too deeply") from None
