"""File edge: atomic writes and validated reads that fail with one line naming file and field."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from ci_bench.errors import InputError

M = TypeVar("M", bound=BaseModel)


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
    """First pydantic error as ``field.path: message``."""
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    return f"{where}: {err['msg']}"


def read_model(
    path: Path, model: type[M], *, what: str, schema_version: int | tuple[int, ...] | None
) -> M:
    """Load and validate a JSON file; every failure is an InputError naming the file and field."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: {what} file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read {what} file: {exc}") from None
    if not text.strip():
        raise InputError(f"{path}: {what} file is empty")
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except (json.JSONDecodeError, ValueError) as exc:
        raise InputError(f"{path}: invalid JSON: {exc}") from None
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
                f"{path}: schema_version: {found!r} is not supported (this ci-bench reads "
                f"{versions}; {hint})"
            )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{path}: {validation_message(exc)}") from None


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")
