"""The one writer: every file ci-bench writes, atomically and only as a regular file.

A temporary file in the target's folder is renamed over the target, so a reader never sees
half a file and a failed write leaves the previous file as it was. A symbolic link, a
device, a pipe or a folder at the path is refused, never replaced. An existing file is
refused unless the caller may replace it (``--force``, or a documented exception: a resume
target, a run's own checkpoint, a CI artifact folder, the baseline and history stores).
``GITHUB_OUTPUT`` and ``GITHUB_STEP_SUMMARY`` are appended to. A full disk, a name too long
or a permission error is a ``WriteError``: one line naming the path, the reason and what
was kept (exit 2). README, "What ci-bench writes".
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path

from ci_bench.errors import InputError

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
    permission) wherever it surfaced, or a bytecode cache a full disk truncated; None for
    anything else (a bug)."""
    if isinstance(exc, EOFError | ValueError) and "marshal data" in str(exc):
        import sysconfig

        site = sysconfig.get_paths()["purelib"]
        return (
            f"a truncated bytecode cache ({exc}: a __pycache__ file cut short, by a full disk "
            f"earlier?): remove the __pycache__ folders under {site} (or the project's) and "
            "run again, or set PYTHONDONTWRITEBYTECODE=1"
        )
    if not isinstance(exc, OSError) or exc.errno not in _REASONS:
        return None
    where = exc.filename if exc.filename is not None else "a file"
    return f"{where}: {os_reason(exc)}"


class WriteError(InputError):
    """A file could not be written: the path, why, and what was kept (exit 2)."""

    def __init__(self, path: Path, what: str, why: str, kept: str | None = None) -> None:
        self.path, self.what, self.why, self.kept = path, what, why, kept
        tail = f"; {kept}" if kept else ""
        super().__init__(f"{path}: cannot write the {what}: {why}{tail}")

    def keeping(self, kept: str) -> WriteError:
        """The same failure, saying what the caller kept (e.g. the cases measured so far)."""
        return WriteError(self.path, self.what, self.why, kept)


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
    path: Path,
    data: bytes | Iterable[bytes],
    *,
    what: str,
    replace: bool = False,
    mode: int | None = None,
) -> None:
    """Atomically make ``path`` a regular file holding ``data``; readers never see half a file.

    ``data`` may come in pieces (a large file is never one buffer); a piece that fails to
    come (an exception) leaves the target as it was. New files get ``0o666`` less the umask
    (or ``mode``); a replaced file keeps its mode.
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
    # A short temporary name: a target name near the 255-byte limit must still work. It
    # holds the writer's pid, so a later write removes what a killed one left.
    _remove_stale_temps(path)
    tmp = path.parent / f".{path.name[:32]}.{os.getpid()}-{secrets.token_hex(6)}.tmp"
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
            for piece in (data,) if isinstance(data, bytes) else data:
                _write_all(fd, piece)
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process, or no way to tell: assume it lives
        return True
    return True


def _remove_stale_temps(path: Path) -> None:
    """Temporary files of ``path``'s name whose writer is gone (SIGKILL, power loss): a
    live writer's are left alone. Best effort: nothing here fails a write."""
    prefix = f".{path.name[:32]}."
    try:
        names = [p.name for p in path.parent.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix) : -len(".tmp")].split("-", 1)[0]
        if name.endswith(".tmp") and pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                (path.parent / name).unlink()


def write_text(
    path: Path,
    text: str | Iterable[str],
    *,
    what: str,
    replace: bool = False,
    mode: int | None = None,
) -> None:
    """``write_bytes`` of UTF-8 text, whole or in pieces (each encoded as it is written)."""
    data = text.encode("utf-8") if isinstance(text, str) else (t.encode("utf-8") for t in text)
    write_bytes(path, data, what=what, replace=replace, mode=mode)


def write_folder_files(
    folder: Path, files: dict[str, str], *, what: str, mode: int | None = None
) -> None:
    """Several files of a generated folder replaced together (the site's page and data):
    each is first written under a temporary name, then all are renamed. A failure while
    writing (a full disk) leaves every old file as it was, never a new one beside old ones.
    """
    for name in files:
        problem = target_problem(folder / name, replace=True)
        if problem:
            raise WriteError(folder / name, what, problem, "nothing was written")
    staged: list[tuple[Path, Path]] = []
    try:
        for name, text in files.items():
            final = folder / name
            temp = folder / f".{name[:32]}.{os.getpid()}-{secrets.token_hex(6)}.tmp"
            _remove_stale_temps(final)
            try:
                write_text(temp, text, what=what, mode=mode)
            except WriteError as exc:
                raise WriteError(final, what, exc.why, "nothing was written") from None
            staged.append((temp, final))
        for temp, final in staged:
            try:
                temp.replace(final)
            except OSError as exc:
                raise WriteError(final, what, os_reason(exc), "some files were replaced") from None
    finally:
        for temp, _ in staged:
            temp.unlink(missing_ok=True)


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
