"""``ci-bench promote``: a results file written as ``baselines/<kernel>_v<version>.json``."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from ci_bench.commands.common_args import FOLDER, add_baselines_dir, add_config
from ci_bench.commands.shared import request_from
from ci_bench.commands.validate import path_arg, tag_arg
from ci_bench.pipeline.judging import load_results
from ci_bench.store.baselines import baseline_path, dirty_note
from ci_bench.store.transaction import promote_into

NAME = "promote"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(NAME, help="write results as baselines/<kernel>_v<version>.json")
    parser.add_argument("results", type=path_arg)
    add_baselines_dir(parser, FOLDER)  # promote creates it
    parser.add_argument("--tag", type=tag_arg, help="release tag recorded in the provenance")
    parser.add_argument(
        "--force", action="store_true", help="replace an existing entry for this device"
    )
    add_config(parser)


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    request = request_from(args, cwd)
    assert request.inputs.results is not None
    results = load_results(request.inputs.results)
    folder = request.baselines.folder
    promotions = promote_into(
        folder,
        results,
        promoted_at=datetime.now(UTC),
        tag=args.tag,
        force=args.force,
        source=str(request.inputs.results),
    )
    for p in promotions:
        path = baseline_path(folder, p.kernel, p.version)
        out.write(f"{p.action}: {path} ({p.device})\n")
    note = dirty_note(results)
    if note and any(p.action != "unchanged" for p in promotions):
        out.write(note + "\n")
    return 0
