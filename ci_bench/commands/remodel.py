"""``ci-bench remodel``: a baseline's cost models brought to this ci-bench's model revision.

A baseline modelled by another revision is "not judged" by the model (its figures moved with
the model, not the kernel) until a release promotes new numbers; remodelling keeps every
measurement and models the measured commit's kernels again (``pipeline.remodel``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ci_bench.commands.common_args import (
    add_case_timeout,
    add_config,
    add_deviceless,
    add_quiet,
)
from ci_bench.commands.shared import request_from
from ci_bench.commands.validate import path_arg
from ci_bench.errors import ExitCode, InputError
from ci_bench.schema.model import MODEL_REVISION

if TYPE_CHECKING:  # the pipeline is imported when the command runs, not with the parser
    from ci_bench.pipeline.remodel import EntryOutcome

NAME = "remodel"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        NAME,
        help="a baseline's cost models brought to this ci-bench's model revision, its "
        "measurements kept",
        description="Model a baseline's cases again with this ci-bench's cost model, from "
        "the kernel code of the commit that was measured; every measurement is kept.",
    )
    parser.add_argument(
        "baselines",
        nargs="+",
        type=path_arg,
        metavar="BASELINE",
        help="a baseline file, or a folder: every baseline file in it",
    )
    parser.add_argument(
        "--at",
        metavar="REF",
        help="model the kernels at this git ref (default: each entry's provenance commit; "
        "an entry measured with uncommitted changes needs it)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if a model would change (a stale revision or figure)",
    )
    add_deviceless(parser, "model the entries measured on this chip")
    add_case_timeout(parser)
    add_config(parser)
    add_quiet(parser)


def _line(outcome: EntryOutcome, shown: str, *, check: bool) -> str:
    """One entry's outcome, in one line (``shown``: its file as the command line named it)."""
    where = f"{shown} ({outcome.device})"
    remodel = outcome.remodel
    if remodel is None or outcome.commit is None:
        return f"left: {where}: {outcome.left}"
    was = ", ".join("unrecorded" if r is None else str(r) for r in remodel.revisions)
    head = f"{where}: {len(remodel.entry.cases)} cases at {outcome.commit[:12]}"
    if remodel.action == "unchanged":
        return f"unchanged: {head}, revision {was}, every model the same"
    moved = f"modelled time moved on {remodel.moved}"
    if remodel.largest is not None:
        largest = remodel.largest
        moved += f" (most: {largest.case} on {largest.chip}, {largest.change:+.1%})"
    verb = "stale" if check else "remodelled"
    return f"{verb}: {head}, revision {was} -> {MODEL_REVISION}; {moved}"


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    """Each entry's outcome, a line as it comes; exit 2 if one was refused, else 1 with
    ``--check`` if one is stale, else 0."""
    from ci_bench.pipeline.remodel import remodel_baselines

    request = request_from(args, cwd)
    shown = {(p if p.is_absolute() else cwd / p): str(p) for p in args.baselines}

    def progress(text: str) -> None:
        if not args.quiet:
            sys.stderr.write(text + "\n")

    def report(outcome: EntryOutcome) -> None:
        named = shown.get(outcome.path) or os.path.relpath(outcome.path, cwd)
        out.write(_line(outcome, named, check=args.check) + "\n")

    outcomes = remodel_baselines(
        request,
        list(shown),
        env,
        at=args.at,
        write=not args.check,
        now=datetime.now(UTC),
        progress=progress,
        report=report,
        deviceless=args.deviceless,
    )
    modelled = [o.remodel for o in outcomes if o.remodel is not None]
    refused = sum(o.refused for o in outcomes)
    if refused:
        rest = "the others were" if modelled else "no other was"
        raise InputError(
            f"{refused} baseline entr{'y' if refused == 1 else 'ies'} could not be modelled "
            f"(above, 'left'); {rest}"
        )
    if not modelled:
        where = f"a {args.deviceless}" if args.deviceless else "this kind of machine"
        raise InputError(
            f"nothing to remodel here: no entry was measured on {where} "
            "(the model reads the chip's layouts; remodel on the runner that measured it, "
            "or give --deviceless CHIP on a host without a TPU)"
        )
    stale = any(r.action == "remodelled" for r in modelled)
    return int(ExitCode.FAILED if args.check and stale else ExitCode.OK)
