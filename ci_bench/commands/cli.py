"""Command line: argparse, configuration and the environment meet here and nowhere else."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from ci_bench import __version__
from ci_bench.commands.output import inert_output
from ci_bench.commands.parser import Handlers, build_parser, command_of, handlers
from ci_bench.commands.signals import Terminated, received, signals_as_exceptions
from ci_bench.errors import CiBenchError, ExitCode, SelectionError, SpecError
from ci_bench.text import one_line

# Each subcommand's handler by name (the registry's, in ``parser``, its module imported when
# it runs); every path it writes was checked when the command line was parsed.
COMMANDS: Handlers = handlers()


# The commands that measure (and save each case as it is measured); the others have
# nothing measured to keep, and an interruption must not say otherwise.
MEASURING = frozenset({"run", "ci", "ab"})


def _saved(command: str) -> str:
    """What an interrupted command kept: the file its measured results are in, or nothing
    said when nothing was measured or nothing is kept in a file."""
    measuring = sys.modules.get("ci_bench.pipeline.measuring")
    saved = list(getattr(measuring, "SAVED_TO", ()))
    if command not in MEASURING or not saved:
        return ""
    return f"; results measured so far were saved to {', '.join(map(str, saved))}"


def crash_log(exc: BaseException) -> Path | None:
    """The full traceback of an unexpected error, in a file the one-line message points to."""
    folder = os.environ.get("RUNNER_TEMP") or tempfile.gettempdir()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    try:
        fd, name = tempfile.mkstemp(prefix=f"ci-bench-crash-{stamp}-", suffix=".log", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(f"ci-bench {__version__}, argv {sys.argv!r}\n")
            handle.write("".join(traceback.format_exception(exc)))
    except OSError:
        return None
    return Path(name)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the documented exit code (README, "Exit codes"). Everything it
    prints, argparse's usage errors included, passes the output edge (commands.output)."""
    with inert_output():
        try:
            return _main(argv)
        finally:
            _stop_kernel_processes()


def _stop_kernel_processes() -> None:
    """Nothing outlives the command: a worker that described or traced kernels and was
    never handed to a pool (an error came first) is stopped and waited for."""
    started = sys.modules.get("ci_bench.measure.kernel_process")
    if started is not None:
        started.close_all()


def _signalled(signum: int, command: str) -> int:
    """The command ended by a signal (raised, or come back as another exception): said as
    the signal, 143 or 130."""
    if signum == signal.SIGTERM:
        sys.stderr.write(f"ci-bench: terminated (SIGTERM){_saved(command)}\n")
        return int(ExitCode.TERMINATED)
    sys.stderr.write(f"ci-bench: interrupted{_saved(command)}\n")
    return int(ExitCode.INTERRUPTED)


def _main(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    measuring = sys.modules.get("ci_bench.pipeline.measuring")
    if measuring is not None:  # an earlier command in this process (the tests') saved its own
        measuring.SAVED_TO.clear()
    command = command_of(argv) or ""
    try:
        # From the first moment: a SIGTERM while the command's module is still imported
        # (a cancelled job) exits 143 as one during the command does.
        with signals_as_exceptions():
            args = build_parser(argv).parse_args(argv)
            if getattr(args, "config", "absent") is None and os.environ.get("CI_BENCH_CONFIG"):
                # The reusable workflows' `config` input: the pyproject.toml with its config.
                args.config = Path(os.environ["CI_BENCH_CONFIG"])
            return COMMANDS[args.command](args, os.environ, Path.cwd(), sys.stdout)
    except (CiBenchError, SelectionError, SpecError) as exc:
        if (signum := received()) is not None:  # the signal, turned into an error on the way
            return _signalled(signum, command)
        code = exc.exit_code if isinstance(exc, CiBenchError) else ExitCode.USAGE
        sys.stderr.write(f"ci-bench: error: {one_line(str(exc))}\n")
        return int(code)
    except BrokenPipeError:  # the reader went away (`| head`): nothing left to say
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return int(ExitCode.OK)
    except Terminated:
        return _signalled(signal.SIGTERM, command)
    except KeyboardInterrupt:
        return _signalled(signal.SIGINT, command)
    except Exception as exc:  # a bug: never a traceback on the terminal, never exit 1
        if (signum := received()) is not None:  # the signal, raised inside code that wrapped it
            return _signalled(signum, command)
        from ci_bench.store.files import environment_error

        if environment_error(exc):  # the machine's fault (disk full, ...), not a bug
            sys.stderr.write(f"ci-bench: error: {one_line(environment_error(exc) or '')}\n")
            return int(ExitCode.USAGE)
        log = crash_log(exc)
        where = f"the traceback is in {log}" if log else "no log could be written"
        sys.stderr.write(
            f"ci-bench: internal error: {type(exc).__name__}: {one_line(str(exc))[:300]} "
            f"(a bug in ci-bench, please report it; {where})\n"
        )
        return int(ExitCode.INTERNAL)


if __name__ == "__main__":
    sys.exit(main())
