"""Flag groups shared by several subcommands: declared once, so their help cannot drift."""

from __future__ import annotations

import argparse

from ci_bench.schema.chips import CHIP_NAMES


def add_chip(parser: argparse.ArgumentParser, what: str) -> None:
    """``--chip NAME`` (repeatable): the TPU chips a command traces, lowers or models as."""
    parser.add_argument(
        "--chip",
        action="append",
        default=[],
        metavar="NAME",
        help=f"{what} as this TPU chip; jax's names: {', '.join(CHIP_NAMES)} (repeatable; "
        "default: config target-chips, else this machine's TPU, else all of them)",
    )
