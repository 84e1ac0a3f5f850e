"""``ci-bench merge``: shard results joined into one results file."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.common_args import FILE, add_force
from ci_bench.commands.validate import path_arg
from ci_bench.pipeline.judging import load_results
from ci_bench.store.files import dump_chunks, write_text
from ci_bench.store.merge import merge_results

NAME = "merge"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(NAME, help="join shard results into one results file")
    parser.add_argument("parts", type=path_arg, nargs="+")
    FILE.on(parser.add_argument("--output", "-o", type=path_arg, required=True))
    add_force(parser, "--output file")


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    parts = [(str(path), load_results(path)) for path in args.parts]
    merged = merge_results(parts)
    write_text(args.output, dump_chunks(merged), what="merged results", replace=args.force)
    out.write(f"merged {len(merged.cases)} cases from {len(parts)} files into {args.output}\n")
    return 0
