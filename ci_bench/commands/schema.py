"""``ci-bench schema``: the results file's JSON Schema (a public contract)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.schema import Results

NAME = "schema"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    sub.add_parser(NAME, help="print the results JSON Schema")


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    out.write(json.dumps(Results.model_json_schema(), indent=2) + "\n")
    return 0
