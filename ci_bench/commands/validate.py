"""argparse ``type=`` validators: every flag becomes a typed, in-range value at the boundary.

argparse reports a ``ValueError``/``ArgumentTypeError`` from these as
``argument --flag: <message>``, one line, exit 2. Output paths are checked here too, before
anything is read or measured, so a bad path never costs a measurement.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path

# numpy/jax PRNG seeds are unsigned 32-bit; a larger seed fails deep inside jax.
SEED_MAX = 2**32 - 1
# Far beyond any sensible run, small enough that a typo cannot run for days.
REPEATS_MAX = 1_000_000
RUNS_MAX = 10_000
# One array dimension: int32 indexing on accelerators.
DIM_MAX = 2**31 - 1
MAX_SECONDS = 7 * 24 * 3600.0
PEAK_MAX = 1e9  # TFLOPS or GB/s: any real device is orders of magnitude below


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
    if not text or "\x00" in text:
        raise argparse.ArgumentTypeError(f"not a usable path: {text!r}")
    return Path(text)


# --- output paths ----------------------------------------------------------------------------


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
    from ci_bench.errors import InputError

    raise InputError(f"{flag} {path}: cannot write here: {why}")


def check_output_file(path: Path, flag: str, *, replace: bool = True) -> None:
    """A file ci-bench will write: not a folder, under a folder that exists or can be made."""
    if path.is_dir():
        raise_output(flag, path, "it is a directory")
    if path.exists() or path.is_symlink():
        if not replace:
            from ci_bench.errors import InputError

            raise InputError(
                f"{flag} {path}: already exists; earlier results are never replaced silently "
                "(choose another file, or pass --force)"
            )
        if path.is_symlink() and not path.exists():
            raise_output(flag, path, "it is a dangling symbolic link")
        if not os.access(path.parent, os.W_OK | os.X_OK):
            raise_output(flag, path, f"{path.parent} is not writable")
        return
    _check_creatable(path, flag)


def check_output_dir(path: Path, flag: str, *, must_exist: bool = False) -> None:
    """A folder ci-bench will write into (or create)."""
    from ci_bench.errors import InputError

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
