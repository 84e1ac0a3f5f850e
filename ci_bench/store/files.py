"""The file edge: ONE reader and ONE writer for every file ci-bench reads or writes.

Reading: a file is untrusted (an artifact from pull-request code, a hand-edited baseline, a
history line). Results, baselines, reports, history lines, configs and event payloads all
pass the same limits before pydantic sees them: a regular file of bounded size, UTF-8, JSON
nested at most ``MAX_DEPTH`` deep, finite numbers, valid Unicode. Every failure is one line
naming the file (and line, and field).

Writing: every file is written atomically (a temporary file in the same folder, renamed over
the target), only ever as a regular file: a symbolic link, a device or a folder at the path
is refused, never replaced. An existing file is refused unless the caller says it may be
replaced (``--force``, or a documented exception: a resume target, a run's own checkpoint,
a re-run CI job's artifact folder, the baseline and history stores, which are read, merged
and written back). Append-only files (``GITHUB_OUTPUT``, ``GITHUB_STEP_SUMMARY``) are
appended to. A full disk, a name too long or a permission error is a ``WriteError``: one
line naming the path, the reason and what was kept (exit 2).
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import secrets
import stat
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

_REASONS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large",
    errno.ENAMETOOLONG: "file name too long (at most 255 bytes per name)",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
    errno.ENOTDIR: "a part of the path is not a directory",
    errno.EISDIR: "it is a directory",
    errno.ELOOP: "too many levels of symbolic links",
    errno.EIO: "input/output error",
}


def os_reason(exc: OSError) -> str:
    """An OSError as a short reason: the errno's words, never a traceback."""
    return _REASONS.get(exc.errno or 0) or exc.strerror or type(exc).__name__


def environment_error(exc: BaseException) -> str | None:
    """One line for an OSError the machine caused (a full disk, a name too long, no
    permission) wherever it surfaced; None for anything else (a bug)."""
    if not isinstance(exc, OSError) or exc.errno not in _REASONS:
        return None
    where = exc.filename if exc.filename is not None else "a file"
    return f"{where}: {os_reason(exc)}"


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
    for number, line in enumerate(text.splitlines(), start=1):
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
            data = handle.read(limit + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what} file: {os_reason(exc)}") from None
    if len(data) > limit:
        raise InputError(f"{path}: {what} file is larger than {limit} bytes")
    return data


def read_text(path: Path, what: str, *, limit: int | None = None) -> str:
    return decode_text(read_bytes(path, what, limit=limit), str(path), what)


def read_json(path: Path, what: str) -> Any:
    return parse_json(read_bytes(path, what), str(path), what)


def validate_model(
    data: Any,
    model: type[M],
    *,
    source: str,
    what: str,
    schema_version: int | tuple[int, ...] | None,
) -> M:
    """A parsed JSON value as ``model``: object, known ``schema_version``, valid fields."""
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
        return model.model_validate(data)
    except ValidationError as exc:
        raise InputError(f"{source}: {validation_message(exc)}") from None
    except RecursionError:
        raise InputError(f"{source}: {what} is nested too deeply") from None


def read_model(
    path: Path, model: type[M], *, what: str, schema_version: int | tuple[int, ...] | None
) -> M:
    """Load and validate a JSON file; every failure is an InputError naming the file and field."""
    data = read_json(path, what)
    return validate_model(data, model, source=str(path), what=what, schema_version=schema_version)


# --- writing ---------------------------------------------------------------------------------


class WriteError(InputError):
    """A file could not be written: the path, why, and what was kept (exit 2)."""

    def __init__(self, path: Path, what: str, why: str, kept: str | None = None) -> None:
        self.path, self.what, self.why, self.kept = path, what, why, kept
        tail = f"; {kept}" if kept else ""
        super().__init__(f"{path}: cannot write the {what}: {why}{tail}")

    def keeping(self, kept: str) -> WriteError:
        """The same failure, saying what the caller kept (e.g. the cases measured so far)."""
        return WriteError(self.path, self.what, self.why, kept)


def dump_model(model: BaseModel) -> str:
    return model.model_dump_json(indent=2, exclude_none=False) + "\n"


def target_problem(path: Path, *, replace: bool) -> str | None:
    """Why ``path`` must not be written (None: it may): only regular files are replaced."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return os_reason(exc)
    if stat.S_ISLNK(info.st_mode):
        return "it is a symbolic link (ci-bench writes regular files only; name its target)"
    if stat.S_ISDIR(info.st_mode):
        return "it is a directory"
    if not stat.S_ISREG(info.st_mode):
        return "it is a device, pipe or socket (ci-bench writes regular files only)"
    if not replace:
        return "it already exists; files are never replaced silently (pass --force to replace it)"
    return None


def _write_all(fd: int, data: bytes) -> None:
    """The one low-level write (a seam: tests make it fail as a full disk would)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _fsync_folder(folder: Path) -> None:
    """The rename survives a crash only once the folder is synced (best effort)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes(
    path: Path, data: bytes, *, what: str, replace: bool = False, mode: int | None = None
) -> None:
    """Atomically make ``path`` a regular file holding ``data``; readers never see half a file.

    New files get ``0o666`` less the umask (or ``mode``); a replaced file keeps its mode.
    """
    problem = target_problem(path, replace=replace)
    if problem:
        raise WriteError(path, what, problem, "nothing was written")
    existed = path.exists()
    kept = f"{path} keeps its previous content" if existed else "nothing was written"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(path, what, os_reason(exc), "nothing was written") from None
    # A short temporary name: a target name near the 255-byte limit must still work.
    tmp = path.parent / f".{path.name[:32]}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        raise WriteError(path, what, os_reason(exc), kept) from None
    try:
        try:
            if mode is not None:
                os.fchmod(fd, mode)
            elif existed:
                os.fchmod(fd, stat.S_IMODE(path.stat().st_mode))
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise WriteError(path, what, os_reason(exc), kept) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)


def write_text(
    path: Path, text: str, *, what: str, replace: bool = False, mode: int | None = None
) -> None:
    write_bytes(path, text.encode("utf-8"), what=what, replace=replace, mode=mode)


def atomic_write_text(path: Path, text: str, *, what: str = "file") -> None:
    """``write_text`` that replaces an existing regular file: for call sites whose file is
    one of the named exceptions (a checkpoint, a CI artifact folder, a store file)."""
    write_text(path, text, what=what, replace=True)


def append_text(path: Path, text: str, *, what: str) -> None:
    """Append to a file the caller does not own (``GITHUB_OUTPUT``, ``GITHUB_STEP_SUMMARY``).

    The file may be missing (it is created) or a character device (``/dev/null``), never a
    folder, a pipe or a path whose folder is missing. A failed append is undone: nothing of
    it stays in the file.
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise WriteError(path, what, os_reason(exc), "nothing was written") from None
    if info is not None and stat.S_ISDIR(info.st_mode):
        raise WriteError(path, what, "it is a directory", "nothing was written")
    if info is not None and not (stat.S_ISREG(info.st_mode) or stat.S_ISCHR(info.st_mode)):
        raise WriteError(path, what, "it is a pipe, socket or block device", "nothing was written")
    if info is None and not path.parent.is_dir():
        raise WriteError(
            path, what, f"its folder {path.parent} does not exist", "nothing was written"
        )
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    except OSError as exc:
        raise WriteError(path, what, os_reason(exc), "nothing was written") from None
    try:
        start = os.fstat(fd).st_size if info is None or stat.S_ISREG(info.st_mode) else None
        try:
            _write_all(fd, text.encode("utf-8"))
        except OSError as exc:
            kept = "its earlier content is kept"
            if start is not None:
                try:
                    os.ftruncate(fd, start)
                    kept = "nothing was appended; its earlier content is kept"
                except OSError:
                    kept = "part of it may have been appended"
            raise WriteError(path, what, os_reason(exc), kept) from None
    finally:
        os.close(fd)


class Checkpoint:
    """A file rewritten as work progresses (``run --output``): the first write obeys the
    replace rule, later ones replace the checkpoint itself. On failure the error says what
    the file still holds (what the last successful write described)."""

    def __init__(self, path: Path, what: str, *, replace: bool = False) -> None:
        self.path, self.what, self.replace = path, what, replace
        self.holds: str | None = None

    def write(self, text: str, *, holds: str) -> None:
        try:
            write_text(self.path, text, what=self.what, replace=self.replace)
        except WriteError as exc:
            if self.holds is None:
                raise
            raise exc.keeping(f"{self.path} still holds the previous save ({self.holds})") from None
        self.replace, self.holds = True, holds
