"""Flag groups shared by several subcommands: declared once, so their help cannot drift.

Each helper adds its flags to the parser (or argument group) it is given, in the order the
help lists them; a path a command writes is declared an ``Output`` here and checked as soon
as the command line is parsed (``parser.Parser``), so no command checks a path again.
"""

from __future__ import annotations

import argparse

from ci_bench.commands.validate import (
    MAX_SECONDS,
    PEAK_MAX,
    REPEATS_MAX,
    SEED_MAX,
    WORKERS_MAX,
    Existing,
    Output,
    int_range,
    open_fraction,
    path_arg,
    positive_float,
    shape,
    shard_arg,
)
from ci_bench.contract.spec import PROFILES
from ci_bench.defaults import ADAPTIVE_MAX_S, CASE_TIMEOUT_S, DTYPE, REPEATS, SEED, WARMUP
from ci_bench.schema.chips import CHIP_NAMES
from ci_bench.schema.gpus import GPU_NAMES
from ci_bench.schema.timers import TIMER_NAMES

# Something the parser may add flags to: a subcommand's parser or one of its groups.
Flags = argparse.ArgumentParser | argparse._ArgumentGroup

FILE, FOLDER = Output("file"), Output("folder")
EXISTING = Existing()


def add_chip(parser: Flags, what: str) -> None:
    """``--chip NAME`` (repeatable): the TPU chips (or GPUs) a command traces, lowers or
    models as."""
    parser.add_argument(
        "--chip",
        action="append",
        default=[],
        metavar="NAME",
        help=f"{what} as this TPU chip; jax's names: {', '.join(CHIP_NAMES)} (repeatable; "
        "default: config target-chips, else this machine's TPU, else all of them)",
    )


def add_target(parser: Flags, what: str) -> None:
    """``--chip NAME`` (repeatable) for commands that also take GPUs (``lower``, ``analyze``)."""
    parser.add_argument(
        "--chip",
        action="append",
        default=[],
        metavar="NAME",
        help=f"{what} as this TPU chip or GPU: {', '.join(CHIP_NAMES)}; "
        f"{', '.join(GPU_NAMES)} (repeatable; default: config target-chips, else this "
        "machine's accelerator, else every TPU chip, or every GPU for lower --platform cuda)",
    )


def add_config(parser: Flags) -> None:
    """``--config``: the pyproject.toml a command reads (CI_BENCH_CONFIG when absent)."""
    parser.add_argument("--config", type=path_arg, help="pyproject.toml with [tool.ci-bench]")


def add_force(parser: Flags, what: str) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help=f"replace an existing {what} (otherwise refused: nothing is replaced silently)",
    )


def add_output(parser: Flags, what: str, *, force: str | None = "--output file") -> None:
    """``--output/-o FILE`` (checked on parsing) and, unless ``force`` is None, the
    ``--force`` that lets it replace an existing file."""
    FILE.on(parser.add_argument("--output", "-o", type=path_arg, help=f"write {what} here"))
    if force is not None:
        add_force(parser, force)


def add_markdown(parser: Flags) -> None:
    FILE.on(
        parser.add_argument(
            "--markdown", type=path_arg, metavar="FILE", help="write the markdown here"
        )
    )


def add_quiet(parser: Flags) -> None:
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress lines")


def add_seed(parser: Flags, of: str = "inputs") -> None:
    parser.add_argument(
        "--seed", type=int_range(0, SEED_MAX), help=f"PRNG seed for {of} (default {SEED})"
    )


def add_rounds(
    parser: Flags,
    warmup: str = "warmup calls per implementation",
    repeats: str = "timed calls per implementation",
) -> None:
    """``--warmup`` and ``--repeats`` (their defaults are the config's)."""
    parser.add_argument(
        "--warmup", type=int_range(0, REPEATS_MAX), help=f"{warmup} (default {WARMUP})"
    )
    parser.add_argument(
        "--repeats", type=int_range(1, REPEATS_MAX), help=f"{repeats} (default {REPEATS})"
    )


def add_shape(parser: Flags, example: str = "1024,1024,1024") -> None:
    """``--shape`` and ``--dtype``: the specification's ad-hoc case."""
    parser.add_argument("--shape", type=shape, help=f"ad-hoc case, e.g. {example} (with --dtype)")
    parser.add_argument("--dtype", default=DTYPE, help="dtype of the --shape case")


def add_shard(parser: Flags, verb: str) -> None:
    parser.add_argument(
        "--shard", type=shard_arg, help=f"{verb} shard I of N of the matrix, e.g. 2/4"
    )


def add_fail_on(parser: Flags, default: str = "config") -> None:
    parser.add_argument("--fail-on", metavar="STATES", help=f"as for compare (default: {default})")


def add_baselines_dir(parser: Flags, rule: Output | Existing = EXISTING) -> None:
    """``--baselines-dir``: a folder that must exist (a typo is not "no baseline yet"), or
    one the command creates (``promote``: ``FOLDER``)."""
    rule.on(
        parser.add_argument(
            "--baselines-dir", type=path_arg, help="baseline folder (default: config)"
        )
    )


def add_wide(parser: Flags) -> None:
    parser.add_argument(
        "--wide",
        action="store_true",
        help="the terminal table with every column (by default it leaves columns out to "
        "fit 120 and names them)",
    )


def add_selection(parser: argparse.ArgumentParser) -> None:
    """Which kernels and cases: the ``selection`` group of every command that loads SPECs."""
    group = parser.add_argument_group("selection")
    group.add_argument(
        "--kernel",
        action="append",
        default=[],
        metavar="NAME",
        help="kernel to run (repeat or comma-separate; default: all)",
    )
    group.add_argument(
        "--case",
        action="append",
        default=[],
        metavar="GLOB",
        help="case id glob, e.g. 'matmul/B4-*' (repeatable)",
    )
    group.add_argument("--profile", choices=PROFILES, help="matrix profile (default: config)")
    group.add_argument(
        "--kernel-module",
        action="append",
        default=[],
        metavar="MODULE",
        help="extra kernel exposing SPEC: a module name (resolved from the config file's "
        "folder) or a .py file path (repeatable)",
    )
    add_config(group)


def add_timer(parser: argparse.ArgumentParser) -> None:
    """How a call is timed (run, ci, ab, tune --measure): one flag, one default rule."""
    parser.add_argument(
        "--timer",
        choices=TIMER_NAMES,
        help="per-call time: host wall clock (the specification's) or device time from a "
        "jax.profiler trace (default: config, else per platform: profiler on TPU, else "
        "wallclock)",
    )


def add_deviceless(parser: argparse.ArgumentParser, what: str) -> None:
    """``--deviceless CHIP``: a TPU's layouts from libtpu on a host without the chip (the
    chips it compiles for: ``measure.deviceless``, which imports nothing heavy)."""
    from ci_bench.measure.deviceless import TOPOLOGIES

    chips = tuple(TOPOLOGIES)
    parser.add_argument(
        "--deviceless",
        metavar="CHIP",
        choices=chips,
        help=f"on a host without a TPU, {what} with this chip's layouts as libtpu "
        "(pip install 'jax[tpu]') answers them, as a run on the chip does: " + ", ".join(chips),
    )


def add_case_timeout(parser: argparse.ArgumentParser) -> None:
    """The one time limit of kernel code: a case measured, a module imported, a kernel
    traced, modelled or lowered in its worker."""
    parser.add_argument(
        "--case-timeout",
        type=positive_float(MAX_SECONDS),
        metavar="SECONDS",
        help="a case running longer is an error and its worker is replaced; so is a kernel "
        f"module importing, or a kernel tracing, longer (default: config, {CASE_TIMEOUT_S:g})",
    )


def add_measurement(parser: argparse.ArgumentParser) -> None:
    """Options shared by ``run``, ``ci`` and ``ab``: how cases are measured."""
    add_rounds(parser)
    add_seed(parser)
    parser.add_argument(
        "--adaptive",
        type=open_fraction,
        metavar="WIDTH",
        help="sample until the median's 95%% CI is this wide relative to it (e.g. 0.01); "
        "--repeats becomes the minimum",
    )
    parser.add_argument(
        "--max-time",
        type=positive_float(MAX_SECONDS),
        metavar="SECONDS",
        help=f"per-case time cap for --adaptive (default: config, {ADAPTIVE_MAX_S:g})",
    )
    add_shard(parser, "run")
    parser.add_argument(
        "--peak-tflops", type=positive_float(PEAK_MAX), help="override the device's peak TFLOPS"
    )
    parser.add_argument(
        "--peak-gbps", type=positive_float(PEAK_MAX), help="override the device's peak HBM GB/s"
    )
    cache = parser.add_mutually_exclusive_group()
    FOLDER.on(
        cache.add_argument(
            "--compilation-cache",
            type=path_arg,
            metavar="DIR",
            help="JAX persistent compilation cache folder (default: config)",
        )
    )
    cache.add_argument("--no-compilation-cache", action="store_true")
    add_timer(parser)
    add_case_timeout(parser)
    parser.add_argument(
        "--workers",
        type=int_range(1, WORKERS_MAX),
        metavar="N",
        help="worker processes, each pinned to one accelerator (default: one per local "
        "accelerator; 1 on CPU)",
    )
    parser.add_argument(
        "--resume",
        type=path_arg,
        metavar="RESULTS",
        help="skip the cases this results file already measured with the same settings "
        "(the output defaults to this file)",
    )
    add_quiet(parser)
    parser.add_argument(
        "--cpu-interpret",
        choices=("kernel", "tpu"),
        help="on CPU: 'kernel' (each kernel's own interpret choice) or 'tpu' (every "
        "pallas_call under jax's TPU interpreter; TPU-only kernels run unchanged) "
        "(default: config, kernel)",
    )
