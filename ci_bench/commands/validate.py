"""argparse ``type=`` validators: every flag becomes a typed, in-range value at the boundary.

argparse reports a ``ValueError``/``ArgumentTypeError`` from these as
``argument --flag: <message>``, one line, exit 2. Output paths are checked here too, before
anything is read or measured, so a bad path never costs a measurement.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ci_bench.errors import InputError

# The bounds a flag shares with its config key are the config's (re-exported for the parser).
from ci_bench.pipeline.config import MAX_SECONDS as MAX_SECONDS
from ci_bench.pipeline.config import REPEATS_MAX as REPEATS_MAX
from ci_bench.pipeline.config import SEED_MAX as SEED_MAX
from ci_bench.schema.base import HTTP_URL
from ci_bench.store.files import os_reason, target_problem

RUNS_MAX = 10_000
# One array dimension: int32 indexing on accelerators.
DIM_MAX = 2**31 - 1
PEAK_MAX = 1e9  # TFLOPS or GB/s: any real device is orders of magnitude below
# Far beyond a host's accelerators (8 chips) or a CI matrix; each worker is a process.
WORKERS_MAX = 256
SHARDS_MAX = 10_000  # --shard I/N: runners in one matrix (GitHub allows 256 jobs)
NAME_BYTES_MAX = 255  # one path component (Linux, macOS, Windows)


def int_range(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


def positive_float(high: float) -> Callable[[str], float]:
    """A finite number in (0, high]: NaN, infinities, zero and negatives are refused."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not (math.isfinite(value) and 0 < value <= high):
            raise argparse.ArgumentTypeError(
                f"must be a finite number above 0 and at most {high:g}, got {text!r}"
            )
        return value

    parse.__name__ = "number"
    return parse


def open_fraction(text: str) -> float:
    """A relative width strictly between 0 and 1 (``--adaptive``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(
            f"wants a relative width between 0 and 1, e.g. 0.01, got {text!r}"
        )
    return value


def shape(text: str) -> str:
    """``M,K,N``: positive integers that fit an array dimension; kept as text for the kernel."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or not all(parts):
        raise argparse.ArgumentTypeError(f"wants comma-separated integers, got {text!r}")
    for part in parts:
        try:
            value = int(part, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"wants comma-separated integers, got {text!r}"
            ) from None
        if not 1 <= value <= DIM_MAX:
            raise argparse.ArgumentTypeError(f"dimension {value} is not between 1 and {DIM_MAX}")
    return ",".join(parts)


def path_arg(text: str) -> Path:
    """A path from the command line: not empty, no NUL, valid UTF-8 (it ends up in reports,
    JSON and step outputs, which hold Unicode text only), no name over 255 bytes."""
    if not text or "\x00" in text:
        raise argparse.ArgumentTypeError(f"not a usable path: {text[:200]!r}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(
            f"{text.encode('utf-8', 'backslashreplace').decode()[:200]}: the path is not UTF-8"
        ) from None
    long = [p for p in Path(text).parts if len(p.encode()) > NAME_BYTES_MAX]
    if long:
        raise argparse.ArgumentTypeError(
            f"{long[0][:40]}…: a name in the path is longer than {NAME_BYTES_MAX} bytes"
        )
    return Path(text)


def tag_arg(text: str) -> str:
    """``--tag``: a git tag name as it is recorded (provenance, history): valid UTF-8 (a
    byte that is not becomes an unencodable surrogate here), no spaces or control text."""
    if not re.fullmatch(r"[^\x00-\x20\x7f\ud800-\udfff]{1,256}", text):
        shown = text.encode("utf-8", "backslashreplace").decode()[:80]
        raise argparse.ArgumentTypeError(
            f"{shown!r}: a tag is 1-256 characters of UTF-8 text without spaces or control "
            "characters"
        )
    return text


def shard_arg(text: str) -> str:
    """``--shard I/N``: 1 <= I <= N <= SHARDS_MAX, digits only (no 5,000-digit numbers)."""
    match = re.fullmatch(r"\s*(\d{1,6})\s*/\s*(\d{1,6})\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"wants I/N, e.g. 1/4, got {text[:40]!r}")
    index, count = int(match[1]), int(match[2])
    if not 1 <= index <= count <= SHARDS_MAX:
        raise argparse.ArgumentTypeError(
            f"--shard {index}/{count}: the index must be between 1 and N, N at most {SHARDS_MAX}"
        )
    return f"{index}/{count}"


def http_url(text: str) -> str:
    """A plain http(s) URL (it becomes the target of links in the dashboard)."""
    if len(text) > 2048 or not HTTP_URL.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not a plain http(s) URL: {text[:80]!r}")
    return text.rstrip("/")


# --- output paths ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Output:
    """A flag that names something the command writes; declared where the flag is defined
    (``common_args`` or the command's module), checked right after parsing (``parser.Parser``),
    before anything is read or measured.

    ``replace``: for a file, what may replace an existing one: ``force`` (only ``--force``),
    ``resume`` (``--force``, or the same path as ``--resume``), ``always`` (a regenerated
    artifact). A folder is written into; it may exist.
    """

    kind: Literal["file", "folder"]
    replace: Literal["force", "resume", "always"] = "force"

    def on(self, action: argparse.Action) -> argparse.Action:
        """Declare ``action`` an output of this kind (returns it)."""
        action.output = self  # type: ignore[attr-defined]
        return action

    def check(self, path: Path, flag: str, args: argparse.Namespace) -> None:
        if self.kind == "folder":
            check_output_dir(path, flag)
            return
        allowed = self.replace == "always" or bool(getattr(args, "force", False))
        if self.replace == "resume" and getattr(args, "resume", None) is not None:
            allowed = allowed or Path(args.resume) == path
        check_output_file(path, flag, replace=allowed)


@dataclass(frozen=True)
class Existing:
    """A folder flag that must name an existing, writable folder: an explicit folder that
    is absent is a typo, not "nothing stored yet". Checked right after parsing, after every
    ``Output``; skipped when the flag ``unless`` names is given (read at another commit)."""

    unless: str | None = None

    def on(self, action: argparse.Action) -> argparse.Action:
        action.existing = self  # type: ignore[attr-defined]
        return action

    def check(self, path: Path, flag: str, args: argparse.Namespace) -> None:
        if self.unless is None or not getattr(args, self.unless, None):
            check_output_dir(path, flag, must_exist=True)


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return Path()


def _check_creatable(path: Path, flag: str) -> None:
    """``path`` (absent) can be created: its nearest existing ancestor is a writable folder."""
    ancestor = _nearest_existing(path.parent if path.parent != path else path)
    if not ancestor.is_dir():
        raise_output(flag, path, f"{ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise_output(flag, path, f"{ancestor} is not writable")


def raise_output(flag: str, path: Path, why: str) -> None:
    raise InputError(f"{flag} {path}: cannot write here: {why}")


def _safely(check: Callable[[], None], flag: str, path: Path) -> None:
    """A check whose system calls may fail (a name too long, a loop of links): one line."""
    long = [p for p in path.parts if len(os.fsencode(p)) > NAME_BYTES_MAX]
    if long:
        raise_output(flag, path, f"a name is longer than {NAME_BYTES_MAX} bytes")
    try:
        check()
    except OSError as exc:
        raise_output(flag, path, os_reason(exc))


def check_output_file(path: Path, flag: str, *, replace: bool = True) -> None:
    """A file ci-bench will write: a regular file (or nothing yet) under a folder that exists
    or can be made; never a folder, a link, a device or pipe; an existing file only with
    ``replace``."""

    def check() -> None:
        if path.is_dir():
            raise_output(flag, path, "it is a directory")
        if path.exists() or path.is_symlink():
            if not replace and path.is_file() and not path.is_symlink():
                raise InputError(
                    f"{flag} {path}: already exists; earlier results are never replaced "
                    "silently (choose another file, or pass --force)"
                )
            problem = target_problem(path, replace=True)
            if problem:
                raise_output(flag, path, problem)
            if not os.access(path.parent, os.W_OK | os.X_OK):
                raise_output(flag, path, f"{path.parent} is not writable")
            return
        _check_creatable(path, flag)

    _safely(check, flag, path)


def check_output_dir(path: Path, flag: str, *, must_exist: bool = False) -> None:
    """A folder ci-bench will write into (or create)."""

    def check() -> None:
        if path.exists():
            if not path.is_dir():
                raise_output(flag, path, "not a directory")
            if not os.access(path, os.W_OK | os.X_OK):
                raise_output(flag, path, "not writable")
            return
        if path.is_symlink():
            raise_output(flag, path, "a dangling symbolic link")
        if must_exist:
            raise InputError(f"{flag} {path}: does not exist")
        _check_creatable(path, flag)

    _safely(check, flag, path)
