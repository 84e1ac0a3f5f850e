"""Exit codes and the one-line errors behind them (documented in README, "Exit codes")."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1  # a regression, or a case state the fail policy counts (error by default)
    USAGE = 2  # invalid usage or input: flags, config, files, schema
    NOTHING_MEASURED = 3  # no case ran, or every case errored
    GITHUB = 4  # the GitHub API step failed (report already written)
    INTERNAL = 5  # a bug in ci-bench: one line, the traceback in a log file
    INTERRUPTED = 130  # SIGINT (Ctrl-C): results measured so far are saved
    TERMINATED = 143  # SIGTERM (a cancelled job): results measured so far are saved


class CiBenchError(Exception):
    """An expected failure: printed as one line, never a traceback."""

    exit_code: ExitCode = ExitCode.USAGE


class SelectionError(ValueError, LookupError):
    """A selection names nothing that exists (unknown kernel, profile, bad shard)."""


class SpecError(ValueError):
    """A kernel's SPEC breaks the contract (bad name, version, matrix or tolerance); here,
    not in ``contract.spec``, so the command line can catch it without loading the contract."""


class InputError(CiBenchError):
    """Bad input: config, flags, a results or baseline file."""
