"""The argparse parser: every subcommand's flags (validated at the boundary by ``validate``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ci_bench import __version__
from ci_bench.commands import analyze, history, init, preview, tune
from ci_bench.commands.common_args import add_chip
from ci_bench.commands.validate import (
    MAX_SECONDS,
    PEAK_MAX,
    REPEATS_MAX,
    RUNS_MAX,
    SEED_MAX,
    WORKERS_MAX,
    Output,
    int_range,
    open_fraction,
    path_arg,
    positive_float,
    shape,
    shard_arg,
    tag_arg,
)
from ci_bench.contract.spec import PROFILES
from ci_bench.errors import InputError
from ci_bench.pipeline.plan import ROLES
from ci_bench.schema.timers import TIMER_NAMES
from ci_bench.text import one_line

FILE, FOLDER = Output("file"), Output("folder")


class Parser(argparse.ArgumentParser):
    """Usage errors in one line (the promise for every bad input), exit 2; every declared
    output path (``Output.on``) checked as soon as the command line is parsed."""

    def error(self, message: str) -> None:  # type: ignore[override]
        text = one_line(str(message))[:500]
        self.exit(2, f"{self.prog}: error: {text} (see {self.prog} --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        namespace, extras = super().parse_known_args(args, namespace)
        for action in self._actions:
            rule = getattr(action, "output", None)
            value = getattr(namespace, action.dest, None)
            if rule is not None and value is not None:
                flag = action.option_strings[0] if action.option_strings else action.dest
                try:
                    rule.check(Path(value), flag, namespace)
                except InputError as exc:
                    self.exit(2, f"ci-bench: error: {one_line(str(exc))[:500]}\n")
        return namespace, extras


def add_force(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help=f"replace an existing {what} (otherwise refused: nothing is replaced silently)",
    )


def _add_selection(parser: argparse.ArgumentParser) -> None:
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
    group.add_argument("--config", type=path_arg, help="pyproject.toml with [tool.ci-bench]")


def _add_measurement(run: argparse.ArgumentParser) -> None:
    """Options shared by ``run`` and ``ci``: how cases are measured."""
    run.add_argument(
        "--warmup",
        type=int_range(0, REPEATS_MAX),
        help="warmup calls per implementation (default 5)",
    )
    run.add_argument(
        "--repeats",
        type=int_range(1, REPEATS_MAX),
        help="timed calls per implementation (default 20)",
    )
    run.add_argument(
        "--seed", type=int_range(0, SEED_MAX), help="PRNG seed for inputs (default 42)"
    )
    run.add_argument(
        "--adaptive",
        type=open_fraction,
        metavar="WIDTH",
        help="sample until the median's 95%% CI is this wide relative to it (e.g. 0.01); "
        "--repeats becomes the minimum",
    )
    run.add_argument(
        "--max-time",
        type=positive_float(MAX_SECONDS),
        metavar="SECONDS",
        help="per-case time cap for --adaptive (default: config, 30)",
    )
    run.add_argument("--shard", type=shard_arg, help="run shard I of N of the matrix, e.g. 2/4")
    run.add_argument(
        "--peak-tflops", type=positive_float(PEAK_MAX), help="override the device's peak TFLOPS"
    )
    run.add_argument(
        "--peak-gbps", type=positive_float(PEAK_MAX), help="override the device's peak HBM GB/s"
    )
    cache = run.add_mutually_exclusive_group()
    FOLDER.on(
        cache.add_argument(
            "--compilation-cache",
            type=path_arg,
            metavar="DIR",
            help="JAX persistent compilation cache folder (default: config)",
        )
    )
    cache.add_argument("--no-compilation-cache", action="store_true")
    run.add_argument(
        "--timer",
        choices=TIMER_NAMES,
        help="per-call time: host wall clock (the specification's) or device time from a "
        "jax.profiler trace (default: config, else per platform: wallclock)",
    )
    run.add_argument(
        "--case-timeout",
        type=positive_float(MAX_SECONDS),
        metavar="SECONDS",
        help="a case running longer is an error and its worker is replaced (default: config, 600)",
    )
    run.add_argument(
        "--workers",
        type=int_range(1, WORKERS_MAX),
        metavar="N",
        help="worker processes, each pinned to one accelerator (default: one per local "
        "accelerator; 1 on CPU)",
    )
    run.add_argument(
        "--resume",
        type=path_arg,
        metavar="RESULTS",
        help="skip the cases this results file already measured with the same settings "
        "(the output defaults to this file)",
    )
    run.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    run.add_argument(
        "--cpu-interpret",
        choices=("kernel", "tpu"),
        help="on CPU: 'kernel' (each kernel's own interpret choice) or 'tpu' (every "
        "pallas_call under jax's TPU interpreter; TPU-only kernels run unchanged) "
        "(default: config, kernel)",
    )


def _add_wide(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--wide",
        action="store_true",
        help="the terminal table with every column (by default it leaves columns out to "
        "fit 120 and names them)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="ci-bench", description="Continuous benchmarking for JAX Pallas kernels.")
    parser.add_argument("--version", action="version", version=f"ci-bench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run the benchmark matrix and print a table")
    _add_selection(run)
    _add_measurement(run)
    run.add_argument("--shape", type=shape, help="ad-hoc case, e.g. 1024,1024,1024 (with --dtype)")
    run.add_argument("--dtype", default="bfloat16", help="dtype of the --shape case")
    run.add_argument(
        "--lower",
        choices=("tpu", "cuda"),
        help="first lower each case for this platform; a case that cannot is an error",
    )
    Output("file", "resume").on(
        run.add_argument("--output", "-o", type=path_arg, help="write the results JSON here")
    )
    run.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --output file (otherwise refused: results are never lost)",
    )
    run.add_argument(
        "--format",
        choices=("table", "json", "markdown"),
        default="table",
        help="what to print on stdout",
    )
    _add_wide(run)

    ci = sub.add_parser("ci", help="what the GitHub event asks for: run, compare, report, promote")
    _add_selection(ci)
    _add_measurement(ci)
    ci.add_argument(
        "--role",
        choices=ROLES,
        default="all",
        help="the workflow job this call is: plan (which jobs run), shard, ab, report, "
        "comment, lower, relay, promote, record; all (default) does everything in one job",
    )
    ci.add_argument(
        "--report-dir",
        type=path_arg,
        help="comment and relay roles: the downloaded artifact (default: --out-dir)",
    )
    FOLDER.on(
        ci.add_argument(
            "--out-dir",
            type=path_arg,
            default=Path("ci-bench-out"),
            help="results, report and comment context go here (the artifact; a re-run job "
            "rewrites its files)",
        )
    )
    ci.add_argument(
        "--results", type=path_arg, help="use these (merged) results instead of running"
    )
    ci.add_argument(
        "--ab-report",
        type=path_arg,
        metavar="FILE",
        help="mode both: the A/B report another job measured (instead of running the A/B here)",
    )
    ci.add_argument(
        "--baseline-version",
        metavar="VERSION",
        help="compare with this version's baselines: VERSION or KERNEL=VERSION,... "
        "(default: each kernel's own; a dispatch input)",
    )
    ci.add_argument("--baselines-dir", type=path_arg, help="baseline folder (default: config)")
    ci.add_argument(
        "--baselines-ref",
        metavar="REF",
        help="read the baseline folder as it is at this commit (default on a pull request: "
        "its base commit, which the PR cannot edit; '' for the checkout's own)",
    )
    ci.add_argument("--fail-on", metavar="STATES", help="as for compare (default: event, config)")
    ci.add_argument("--no-comment", action="store_true", help="never post the PR comment")
    ci.add_argument(
        "--no-publish",
        action="store_true",
        help="write results and report files only: no summary, outputs, annotations, comment "
        "(shard jobs, whose merged report is published once)",
    )
    ci.add_argument(
        "--mode",
        choices=("baseline", "ab", "both"),
        help="stored baseline, A/B against a base ref, or both (default: event, config)",
    )
    ci.add_argument("--base", metavar="REF", help="A/B base ref (default: the PR's base)")
    ci.add_argument(
        "--promote-via",
        choices=("commit", "pull-request"),
        help="how a release tag's baselines land (default: config)",
    )

    ab = sub.add_parser("ab", help="A/B: the base ref's kernels against the head's, in one process")
    _add_selection(ab)
    _add_measurement(ab)
    ab.add_argument("--base", required=True, metavar="REF", help="git ref to compare with")
    ab.add_argument("--format", choices=("table", "markdown", "json"), default="table")
    FILE.on(ab.add_argument("--output", "-o", type=path_arg, help="write the report JSON here"))
    FILE.on(
        ab.add_argument("--markdown", type=path_arg, metavar="FILE", help="write the markdown here")
    )
    add_force(ab, "--output or --markdown file")
    ab.add_argument("--fail-on", metavar="STATES", help="as for compare (default: config)")
    ab.add_argument("--no-confirm", action="store_true", help="do not re-measure flagged cases")

    profile = sub.add_parser(
        "profile", help="jax.profiler trace of one case under a top-level jit; HLO dump"
    )
    _add_selection(profile)
    FOLDER.on(
        profile.add_argument(
            "--out", type=path_arg, required=True, help="folder for trace and dumps"
        )
    )
    profile.add_argument(
        "--runs", type=int_range(1, RUNS_MAX), default=3, help="traced runs (default 3)"
    )
    profile.add_argument(
        "--dump-hlo", action="store_true", help="dump HLO and buffer assignment via XLA_FLAGS"
    )
    profile.add_argument(
        "--top", type=int_range(0, RUNS_MAX), default=10, help="largest buffers to list"
    )

    plot = sub.add_parser("plot", help="roofline chart (PNG) of a results file")
    plot.add_argument("results", type=path_arg)
    FILE.on(plot.add_argument("--out", "-o", type=path_arg, default=Path("roofline.png")))
    add_force(plot, "--out file")
    plot.add_argument("--baseline", type=path_arg, help="results file drawn beside the current one")
    plot.add_argument("--peak-tflops", type=positive_float(PEAK_MAX), help="compute roof (TFLOPS)")
    plot.add_argument("--peak-gbps", type=positive_float(PEAK_MAX), help="memory roof (GB/s)")

    comment = sub.add_parser("comment", help="post the sticky PR comment from a report artifact")
    comment.add_argument(
        "--report-dir",
        type=path_arg,
        required=True,
        help="downloaded artifact with report.json and pr.json",
    )

    lst = sub.add_parser("list", help="list kernels and the cases a selection expands to")
    _add_selection(lst)

    sub.add_parser("schema", help="print the results JSON Schema")

    lower = sub.add_parser(
        "lower", help="lower every selected case's Pallas kernel for TPU or CUDA, on this machine"
    )
    _add_selection(lower)
    lower.add_argument("--platform", required=True, help="tpu, or cuda (needs jax's CUDA plugin)")
    add_chip(lower, "tpu: lower each case")
    lower.add_argument(
        "--shape", type=shape, help="ad-hoc case, e.g. 1024,1024,1024 (with --dtype)"
    )
    lower.add_argument("--dtype", default="bfloat16", help="dtype of the --shape case")
    lower.add_argument("--shard", type=shard_arg, help="lower shard I of N of the matrix, e.g. 2/4")
    lower.add_argument(
        "--seed", type=int_range(0, SEED_MAX), help="PRNG seed for input shapes (default 42)"
    )
    FILE.on(
        lower.add_argument("--output", "-o", type=path_arg, help="write the lowering JSON here")
    )
    add_force(lower, "--output file")
    lower.add_argument("--quiet", "-q", action="store_true", help="no progress lines")

    check = sub.add_parser(
        "check-spec", help="validate kernel SPECs without running them (default: the config's)"
    )
    check.add_argument(
        "modules", nargs="*", metavar="MODULE", help="module name or .py file exposing SPEC"
    )
    check.add_argument("--config", type=path_arg, help="pyproject.toml with [tool.ci-bench]")

    compare = sub.add_parser("compare", help="compare results with baselines; exit on verdict")
    compare.add_argument("results", type=path_arg, help="results JSON from ci-bench run")
    compare.add_argument("--baselines-dir", type=path_arg, help="baseline folder (default: config)")
    compare.add_argument(
        "--baseline",
        type=path_arg,
        action="append",
        default=[],
        metavar="FILE",
        help="compare with this baseline file (repeatable, one per kernel)",
    )
    compare.add_argument(
        "--baseline-version",
        metavar="VERSION",
        help="compare with this version's baselines: VERSION (every kernel that has it) "
        "or KERNEL=VERSION,...",
    )
    compare.add_argument("--format", choices=("table", "markdown", "json"), default="table")
    FILE.on(
        compare.add_argument("--output", "-o", type=path_arg, help="write the report JSON here")
    )
    FILE.on(
        compare.add_argument(
            "--markdown", type=path_arg, metavar="FILE", help="write the markdown here"
        )
    )
    add_force(compare, "--output or --markdown file")
    compare.add_argument(
        "--fail-on",
        metavar="STATES",
        help="states that fail besides regression, e.g. error,missing,noisy "
        "('none' for regressions only; default: config)",
    )
    compare.add_argument("--config", type=path_arg, help="pyproject.toml with [tool.ci-bench]")
    _add_wide(compare)

    promote = sub.add_parser("promote", help="write results as baselines/<kernel>_v<version>.json")
    promote.add_argument("results", type=path_arg)
    FOLDER.on(
        promote.add_argument(
            "--baselines-dir", type=path_arg, help="baseline folder (default: config)"
        )
    )
    promote.add_argument("--tag", type=tag_arg, help="release tag recorded in the provenance")
    promote.add_argument(
        "--force", action="store_true", help="replace an existing entry for this device"
    )
    promote.add_argument("--config", type=path_arg, help="pyproject.toml with [tool.ci-bench]")

    merge = sub.add_parser("merge", help="join shard results into one results file")
    merge.add_argument("parts", type=path_arg, nargs="+")
    FILE.on(merge.add_argument("--output", "-o", type=path_arg, required=True))
    add_force(merge, "--output file")
    history.register(sub)
    analyze.register(sub, _add_selection)
    init.register(sub, _add_selection)
    tune.register(sub, _add_selection)
    preview.register(sub, _add_selection)
    return parser
