"""Command line: argparse, configuration and the environment meet here and nowhere else."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

from ci_bench import __version__
from ci_bench.commands import analyze, history, init, preview, tune
from ci_bench.commands.ab import cmd_ab
from ci_bench.commands.ci import cmd_ci, cmd_comment
from ci_bench.commands.compare import cmd_compare, cmd_merge, cmd_promote
from ci_bench.commands.lower import cmd_check_spec, cmd_lower
from ci_bench.commands.parser import build_parser
from ci_bench.commands.profile import cmd_plot, cmd_profile
from ci_bench.commands.run import cmd_list, cmd_run, cmd_schema
from ci_bench.commands.validate import check_output_dir, check_output_file
from ci_bench.contract.matrix import SelectionError
from ci_bench.contract.spec import SpecError
from ci_bench.errors import CiBenchError, ExitCode
from ci_bench.store.files import environment_error
from ci_bench.text import one_line

COMMANDS = {
    "run": cmd_run,
    "list": cmd_list,
    "schema": cmd_schema,
    "compare": cmd_compare,
    "promote": cmd_promote,
    "merge": cmd_merge,
    "ci": cmd_ci,
    "comment": cmd_comment,
    "profile": cmd_profile,
    "ab": cmd_ab,
    "plot": cmd_plot,
    **history.COMMANDS,
    **analyze.COMMANDS,
    **init.COMMANDS,
    **tune.COMMANDS,
    **preview.COMMANDS,
    "lower": cmd_lower,
    "check-spec": cmd_check_spec,
}


class Terminated(KeyboardInterrupt):
    """SIGTERM (a cancelled CI job) unwinds like Ctrl-C: what was measured stays saved."""


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def check_paths(args: argparse.Namespace) -> None:
    """Every output path of the command, checked before anything is read or measured."""
    command = args.command
    if command in ("run", "ab") and args.output is not None:
        # A resumed run rewrites the file it resumes: that is what it is for.
        resuming = command == "run" and args.resume is not None and args.resume == args.output
        check_output_file(
            args.output, "--output", replace=command == "ab" or args.force or resuming
        )
    if command in ("compare", "merge") and args.output is not None:
        check_output_file(args.output, "--output")
    if command in ("compare", "ab") and args.markdown is not None:
        check_output_file(args.markdown, "--markdown")
    if command in ("run", "ci", "ab") and args.compilation_cache is not None:
        check_output_dir(args.compilation_cache, "--compilation-cache")
    if command == "plot":
        check_output_file(args.out, "--out")
    if command == "profile":
        check_output_dir(args.out, "--out")
    if command == "ci":
        check_output_dir(args.out_dir, "--out-dir")
    # An explicit baselines folder that does not exist is a typo, not "no baseline yet"
    # (unless ci reads it at another commit with --baselines-ref).
    if command in ("ci", "compare") and args.baselines_dir is not None:
        at_ref = command == "ci" and args.baselines_ref
        if not at_ref:
            check_output_dir(args.baselines_dir, "--baselines-dir", must_exist=True)
    if command == "promote" and args.baselines_dir is not None:
        check_output_dir(args.baselines_dir, "--baselines-dir")


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
    """Entry point; returns the documented exit code (README, "Exit codes")."""
    args = build_parser().parse_args(argv)
    if getattr(args, "config", "absent") is None and os.environ.get("CI_BENCH_CONFIG"):
        # The reusable workflows' `config` input: the pyproject.toml with [tool.ci-bench].
        args.config = Path(os.environ["CI_BENCH_CONFIG"])
    try:
        with _sigterm_as_interrupt():
            check_paths(args)
            return COMMANDS[args.command](args, os.environ, Path.cwd(), sys.stdout)
    except (CiBenchError, SelectionError, SpecError) as exc:
        code = exc.exit_code if isinstance(exc, CiBenchError) else ExitCode.USAGE
        sys.stderr.write(f"ci-bench: error: {one_line(str(exc))}\n")
        return int(code)
    except BrokenPipeError:  # the reader went away (`| head`): nothing left to say
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return int(ExitCode.OK)
    except Terminated:
        sys.stderr.write("ci-bench: terminated (SIGTERM); results measured so far were saved\n")
        return int(ExitCode.TERMINATED)
    except KeyboardInterrupt:
        sys.stderr.write("ci-bench: interrupted; results measured so far were saved\n")
        return int(ExitCode.INTERRUPTED)
    except Exception as exc:  # a bug: never a traceback on the terminal, never exit 1
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
