"""``ci-bench ab --base REF``: head and base kernels measured as pairs, interleaved.

Separate runs drift apart, so each case's head and base kernels are timed round by round
on the same inputs, in one worker process per pair (``ci_bench.pipeline.ab``); the base is
checked out in a temporary git worktree beside this one.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.compare import emit_report, write_report_files
from ci_bench.commands.run import request_from
from ci_bench.errors import InputError
from ci_bench.pipeline.ab import run_ab
from ci_bench.pipeline.session import load_specs


def cmd_ab(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    if getattr(args, "resume", None) is not None:
        raise InputError("--resume does not apply to ab: an A/B is measured whole, in pairs")
    request = request_from(args, cwd)
    report = run_ab(request, load_specs(request), env)
    write_report_files(report, request.outputs.output, args.markdown, replace=args.force)
    emit_report(report, request.outputs.fmt, out)
    return report.exit_code
