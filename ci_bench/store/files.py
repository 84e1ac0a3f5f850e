"""The file edge: ONE reader for every file ci-bench reads, and the writer's entry points.

A file read here is untrusted (an artifact from pull-request code, a hand-edited baseline, a
history line). Results, baselines, reports, history lines, configs and event payloads all
pass the same limits before pydantic sees them: a regular file of bounded size, UTF-8, JSON
nested at most ``MAX_DEPTH`` deep, finite numbers, valid Unicode. Every failure is one line
naming the file (and line, and field). Writing is ``ci_bench.store.writer`` (re-exported
here, so a caller has one module for its files).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ci_bench.errors import InputError
from ci_bench.store.writer import (  # noqa: F401 -- the writer's entry points, re-exported
    Checkpoint,
    WriteError,
    append_text,
    atomic_write_text,
    environment_error,
    os_reason,
    target_problem,
    write_bytes,
    write_text,
)

M = TypeVar("M", bound=BaseModel)

# A full-profile results file with raw samples is a few MB; 64 MB is far beyond any real one.
MAX_FILE_BYTES = 64 * 1024 * 1024
# Results nest about 6 deep; JSON deeper than this is hostile, and Python's parser would
# hit its recursion limit (a RecursionError, not a message) long before pydantic could.
MAX_DEPTH = 64

# --- reading ---------------------------------------------------------------------------------


def validation_message(exc: ValidationError) -> str:
    """First pydantic error as ``field.path: message``, on one line."""
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    message = str(err["msg"]).removeprefix("Value error, ")
    return " ".join(f"{where}: {message}".split())[:500]


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


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _bad_text(text: str) -> bool:
    """A lone surrogate (``"\\ud800"`` in JSON): not Unicode, and unwritable as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def invalid_value(value: object) -> str | None:
    """``path: why`` of the first NaN, infinity or non-Unicode string in a JSON-like value."""
    stack: list[tuple[object, str]] = [(value, "")]
    while stack:
        item, at = stack.pop()
        where = at or "(top level)"
        if isinstance(item, float) and not math.isfinite(item):
            return f"{where[:200]}: not a finite number"
        if isinstance(item, str) and _bad_text(item):
            return f"{where[:200]}: not valid Unicode text"
        if isinstance(item, dict):
            for k, v in item.items():
                key = str(k)
                if _bad_text(key):
                    return f"{where[:200]}: a key is not valid Unicode text"
                stack.append((v, f"{at}.{key}" if at else key))
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{at}.{i}" if at else str(i)) for i, v in enumerate(item))
    return None


def suspect(value: Any, limit: int, *, text: bool) -> bool:
    """One fast pass (no paths built): could ``value`` be too deep, hold a non-finite number
    or (``text``) a non-Unicode string? Only then are the slower, path-naming checks run."""
    stack = [(value, 1)]
    isfinite = math.isfinite
    while stack:
        item, depth = stack.pop()
        children = item.values() if type(item) is dict else item
        if text and type(item) is dict and any(_bad_text(str(k)) for k in item):
            return True
        for child in children:
            kind = type(child)
            if kind is dict or kind is list:
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
            elif (kind is float and not isfinite(child)) or (
                text and kind is str and _bad_text(child)
            ):
                return True
    return False


def non_finite(value: object) -> str | None:
    """The dotted path of the first NaN or infinity in a JSON-like value, iteratively."""
    found = invalid_value(value)
    return found.rsplit(": ", 1)[0] if found and found.endswith("finite number") else None


def decode_text(data: bytes, source: str, what: str) -> str:
    """Bytes -> text; a file that is not UTF-8 is one line naming the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: {what} is not UTF-8 text (byte {exc.start})") from None


def parse_json(data: bytes | str, source: str, what: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Bytes -> JSON value, refusing what is not UTF-8, too deep or not finite (one line)."""
    text = decode_text(data, source, what) if isinstance(data, bytes) else data
    if not text.strip():
        raise InputError(f"{source}: {what} file is empty")
    deep = f"{source}: {what} is nested deeper than {max_depth} levels"
    try:
        # NaN, Infinity and overflowing literals (1e999) parse to non-finite floats, found
        # below with the field's path: a ci-bench file holds finite numbers only.
        value = json.loads(text)
    except ValueError as exc:  # JSONDecodeError included
        raise InputError(f"{source}: invalid JSON: {' '.join(str(exc).split())[:200]}") from None
    except RecursionError:
        raise InputError(deep) from None
    # A lone surrogate can only come from a \uD800-\uDFFF escape: strings are checked
    # when the text holds one.
    escapes = _SURROGATE_ESCAPE.search(text) is not None
    if suspect([value], max_depth + 1, text=escapes):
        if too_deep(value, max_depth):
            raise InputError(deep)
        bad = invalid_value(value)
        if bad:
            raise InputError(f"{source}: {bad}")
    return value


def json_lines(text: str, source: str, what: str) -> list[tuple[str, Any]]:
    """JSON Lines: ``(where, value)`` per non-blank line, each under ``parse_json``'s rules;
    ``where`` is ``source:line`` for the line's errors."""
    found = []
    # Lines end at LF only: a JSON string may hold U+2028, U+0085 or a form feed raw
    # (a writer need not escape them), and ``splitlines`` would cut a record there.
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            where = f"{source}:{number}"
            found.append((where, parse_json(line, where, what)))
    return found


def read_bytes(path: Path, what: str, *, limit: int | None = None) -> bytes:
    """A regular file's bytes, at most ``limit``; every failure names the file."""
    limit = MAX_FILE_BYTES if limit is None else limit
    try:
        if not path.is_file():
            if not path.exists() and not path.is_symlink():
                raise InputError(f"{path}: {what} file not found")
            raise InputError(f"{path}: {what} file is not a regular file")
        with path.open("rb") as handle:
            # Sized by the file, not the limit: ``read(n)`` allocates n bytes up front.
            want = min(os.fstat(handle.fileno()).st_size, limit) + 1
            data = handle.read(want)
            if len(data) == want and want <= limit:  # it grew since: read on to the limit
                data += handle.read(limit + 1 - want)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what} file: {os_reason(exc)}") from None
    if len(data) > limit:
        raise InputError(f"{path}: {what} file is larger than {limit} bytes")
    return data


def read_text(path: Path, what: str, *, limit: int | None = None) -> str:
    return decode_text(read_bytes(path, what, limit=limit), str(path), what)


def read_json(path: Path, what: str) -> Any:
    # The text only: the bytes are dropped before parsing (the file is not held twice).
    return parse_json(read_text(path, what), str(path), what)


def validate_model(
    data: Any,
    model: type[M],
    *,
    source: str,
    what: str,
    schema_version: int | tuple[int, ...] | None,
    staged: bool = False,
) -> M:
    """A parsed JSON value as ``model``: object, known ``schema_version``, valid fields.

    ``staged``: ``data`` is the caller's to give away; its cases are replaced by their
    models as they are validated (see ``_validate_cases``)."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: {what} must be a JSON object, got {type(data).__name__}")
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
                f"{source}: schema_version: {repr(found)[:40]} is not supported (this ci-bench "
                f"reads {versions}; {hint})"
            )
    try:
        if staged:
            _validate_cases(data, model)
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{source}: {validation_message(exc)}") from None
    except RecursionError:
        raise InputError(f"{source}: {what} is nested too deeply") from None


def _list_item(model: type[BaseModel], name: str) -> type[BaseModel] | None:
    """The model of a ``list[Model]`` field ``name``, if ``model`` has one."""
    field = model.model_fields.get(name)
    args = getattr(field.annotation, "__args__", ()) if field else ()
    item = args[0] if len(args) == 1 else None
    return item if isinstance(item, type) and issubclass(item, BaseModel) else None


def _validate_cases(data: dict[str, Any], model: type[BaseModel]) -> None:
    """A ``cases`` list (top level, or in each of a baseline's ``entries``) validated one
    case at a time, each parsed case replaced by its model as it goes, so a large file's
    parsed JSON and its models are not both held whole (docs/SCALE.md). The model's own
    validation then takes the instances as they are. The first invalid case stops this:
    the whole model is validated as before, so the error reported is the one a whole
    validation reports."""
    entry = _list_item(model, "entries")
    entries = data.get("entries")
    if entry is not None and isinstance(entries, list):
        for raw in entries:
            if isinstance(raw, dict) and not _replace_cases(raw, entry):
                return
    _replace_cases(data, model)


def _replace_cases(data: dict[str, Any], model: type[BaseModel]) -> bool:
    """``data["cases"]`` items replaced by their models; False at the first invalid one."""
    item = _list_item(model, "cases")
    cases = data.get("cases")
    if item is None or not isinstance(cases, list):
        return True
    ids = [c.get("id") for c in cases if isinstance(c, dict)]
    named = [i for i in ids if isinstance(i, str)]
    if len(set(named)) != len(named):
        return False  # the model refuses repeated ids before it validates any case
    for at, raw in enumerate(cases):
        if isinstance(raw, dict):
            try:
                cases[at] = item.model_validate(raw)
            except ValidationError:
                return False
    return True


def read_model(
    path: Path, model: type[M], *, what: str, schema_version: int | tuple[int, ...] | None
) -> M:
    """Load and validate a JSON file; every failure is an InputError naming the file and field."""
    data = read_json(path, what)
    return validate_model(
        data, model, source=str(path), what=what, schema_version=schema_version, staged=True
    )


def dump_model(model: BaseModel) -> str:
    return model.model_dump_json(indent=2, exclude_none=False) + "\n"


def dump_chunks(
    model: BaseModel, fields: tuple[str, ...] = ("cases",), pad: str = ""
) -> Iterator[str]:
    """``dump_model``'s text in pieces, byte for byte: the list ``fields[0]`` one item at a
    time (``fields[1:]`` inside each item), so a large results file, report or baseline is
    never one string in memory (docs/SCALE.md). ``pad`` indents a nested piece."""
    field, inner_fields = fields[0], fields[1:]
    items = getattr(model, field)
    head = model.model_copy(update={field: []}).model_dump_json(indent=2, exclude_none=False)
    # A JSON string holds no raw newline: only the field itself, at the top level, matches.
    marker = f'\n  "{field}": []'
    at = head.find(marker)
    if not items or at < 0:
        yield _padded(model, pad) if pad else dump_model(model)
        return
    inner = pad + "    "
    yield (head[:at] + f'\n  "{field}": [\n').replace("\n", "\n" + pad) + "    "
    for k, item in enumerate(items):
        if k:
            yield ",\n" + inner
        if inner_fields:
            yield from dump_chunks(item, inner_fields, inner)
        else:
            yield item.model_dump_json(indent=2, exclude_none=False).replace("\n", "\n" + inner)
    yield ("\n  ]" + head[at + len(marker) :]).replace("\n", "\n" + pad) + ("" if pad else "\n")


def _padded(model: BaseModel, pad: str) -> str:
    return model.model_dump_json(indent=2, exclude_none=False).replace("\n", "\n" + pad)
