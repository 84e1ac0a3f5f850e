"""Call ``ci_bench.commands.cli.main`` in this process: the fuzzer's fast path to the CLI."""

from __future__ import annotations

import contextlib
import io
import os
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from tests.conftest import FIXTURES, REPO


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def call(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Outcome:
    """Run the CLI with ``args`` in ``cwd``; GitHub variables come only from ``env``."""
    from ci_bench.commands.cli import main

    out, err = io.StringIO(), io.StringIO()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    # worker processes import the kernels as run_cli's subprocesses do: from the repository
    clean["PYTHONPATH"] = os.pathsep.join([str(REPO), str(FIXTURES)])
    previous = Path.cwd()
    with (
        mock.patch.dict(os.environ, {**clean, **(env or {})}, clear=True),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        os.chdir(cwd)
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's --help and usage errors
            code = exc.code if isinstance(exc.code, int) else 2
        finally:
            os.chdir(previous)
    return Outcome(int(code), out.getvalue(), err.getvalue())


def assert_one_line_error(outcome: Outcome, *needles: str) -> None:
    """The promise: exit 2, exactly one line on stderr, naming what was wrong."""
    assert outcome.code == 2, (outcome.code, outcome.err)
    assert len(outcome.lines) == 1, outcome.err
    assert "Traceback" not in outcome.err
    for needle in needles:
        assert needle in outcome.err, (needle, outcome.err)
