"""Command line: argparse, configuration and the environment meet here and nowhere else."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from ci_bench import __version__
from ci_bench.config import Config, load_config, resolve
from ci_bench.errors import CiBenchError, ExitCode, InputError
from ci_bench.io import atomic_write_text, dump_model
from ci_bench.matrix import SelectionError, Shard, expand, select, shard
from ci_bench.spec import PROFILES, Case, KernelSpec, SpecError


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
        help="extra kernel module exposing SPEC (repeatable)",
    )
    group.add_argument("--config", type=Path, help="pyproject.toml with [tool.ci-bench]")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ci-bench", description="Continuous benchmarking for JAX Pallas kernels."
    )
    parser.add_argument("--version", action="version", version=f"ci-bench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run the benchmark matrix and print a table")
    _add_selection(run)
    run.add_argument("--shape", help="ad-hoc case, e.g. 1024,1024,1024 (with --dtype)")
    run.add_argument("--dtype", default="bfloat16", help="dtype of the --shape case")
    run.add_argument("--warmup", type=int, help="warmup calls per implementation (default 5)")
    run.add_argument("--repeats", type=int, help="timed calls per implementation (default 20)")
    run.add_argument("--seed", type=int, help="PRNG seed for inputs (default 42)")
    run.add_argument("--shard", help="run shard I of N of the matrix, e.g. 2/4")
    run.add_argument("--output", "-o", type=Path, help="write the results JSON here")
    run.add_argument(
        "--format",
        choices=("table", "json", "markdown"),
        default="table",
        help="what to print on stdout",
    )
    run.add_argument("--peak-tflops", type=float, help="override the device's peak TFLOPS")
    run.add_argument("--peak-gbps", type=float, help="override the device's peak HBM GB/s")
    cache = run.add_mutually_exclusive_group()
    cache.add_argument(
        "--compilation-cache",
        type=Path,
        metavar="DIR",
        help="JAX persistent compilation cache folder (default: config)",
    )
    cache.add_argument("--no-compilation-cache", action="store_true")
    run.add_argument("--quiet", "-q", action="store_true", help="no progress lines")

    lst = sub.add_parser("list", help="list kernels and the cases a selection expands to")
    _add_selection(lst)

    sub.add_parser("schema", help="print the results JSON Schema")
    return parser


def _split(values: Sequence[str]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _load(args: argparse.Namespace, cwd: Path) -> tuple[Config, Mapping[str, KernelSpec]]:
    from ci_bench.registry import load_kernels

    config = load_config(args.config, cwd)
    modules = [*config.kernels, *_split(args.kernel_module)]
    if not modules:
        raise InputError("no kernels configured: add kernels to [tool.ci-bench] or --kernel-module")
    return config, load_kernels(dict.fromkeys(modules), root=config.root)


def _cases(args: argparse.Namespace, config: Config, specs: Mapping[str, KernelSpec]) -> list[Case]:
    kernels = _split(args.kernel)
    if getattr(args, "shape", None):
        if len(kernels) != 1:
            raise InputError("--shape needs exactly one --kernel")
        if kernels[0] not in specs:
            raise InputError(f"unknown kernel {kernels[0]!r} (known: {', '.join(specs)})")
        try:
            dims = [int(x) for x in args.shape.split(",")]
        except ValueError:
            raise InputError(
                f"--shape wants comma-separated integers, got {args.shape!r}"
            ) from None
        return [specs[kernels[0]].case_from_shape(dims, args.dtype)]
    profile = args.profile or config.default_profile
    return select(expand(specs, profile, kernels), args.case)


def _configure_jax(cache_dir: Path | None) -> None:
    """Persistent compilation cache: later runs load compiled kernels instead of recompiling."""
    import jax

    if cache_dir is not None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", str(cache_dir))
        # Interpret-mode kernels compile in well under the 1 s default threshold.
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def cmd_run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    from ci_bench.devices import fingerprint
    from ci_bench.gitinfo import git_info
    from ci_bench.harness import HarnessSettings
    from ci_bench.progress import Progress
    from ci_bench.render import results_table, run_summary
    from ci_bench.runner import peak_lookup, run_all, run_exit_code, utc_now
    from ci_bench.schema import RunMeta, RunSettings

    config, specs = _load(args, cwd)
    cases = _cases(args, config, specs)
    part = Shard.parse(args.shard) if args.shard else None
    cases = shard(cases, part)
    for name, value in (("--warmup", args.warmup), ("--repeats", args.repeats)):
        if value is not None and value < (1 if name == "--repeats" else 0):
            raise InputError(f"{name} must be {'>= 1' if name == '--repeats' else '>= 0'}")
    for name, value in (("--peak-tflops", args.peak_tflops), ("--peak-gbps", args.peak_gbps)):
        if value is not None and not value > 0:
            raise InputError(f"{name} must be positive")
    settings = HarnessSettings(
        warmup=config.warmup if args.warmup is None else args.warmup,
        repeats=config.repeats if args.repeats is None else args.repeats,
        seed=config.seed if args.seed is None else args.seed,
    )
    cache_dir = None
    if not args.no_compilation_cache:
        chosen = args.compilation_cache or config.compilation_cache_dir
        cache_dir = resolve(config, chosen) if chosen else None
    _configure_jax(cache_dir)

    device = fingerprint()
    meta = RunMeta(
        tool_version=__version__,
        started_at=utc_now(),
        complete=False,
        profile=None if args.shape else (args.profile or config.default_profile),
        shard=str(part) if part else None,
        git=git_info(config.root, env.get("GITHUB_SHA"), env.get("GITHUB_REF")),
        device=device,
        settings=RunSettings(
            warmup=settings.warmup,
            repeats=settings.repeats,
            seed=settings.seed,
            interpret=device.platform == "cpu",
            compilation_cache=str(cache_dir) if cache_dir else None,
        ),
        kernels={name: specs[name].version for name in dict.fromkeys(c.kernel for c in cases)},
    )
    stderr = sys.stderr
    progress = Progress(stderr, live=stderr.isatty(), quiet=args.quiet)
    output = args.output

    def save(results) -> None:
        if output is not None:
            atomic_write_text(output, dump_model(results))

    if not cases:
        progress.note("the selection is empty: nothing to measure")
    results = run_all(
        specs,
        cases,
        settings,
        meta,
        peak_lookup(device, args.peak_tflops, args.peak_gbps),
        progress=progress,
        save=save,
    )
    if args.format == "json":
        out.write(dump_model(results))
    else:
        out.write(results_table(results.cases, "github" if args.format == "markdown" else "simple"))
        out.write("\n\n" + run_summary(results) + "\n")
    if output is not None:
        progress.note(f"results written to {output}")
    return int(run_exit_code(results, config.fail_on.error))


def cmd_list(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    config, specs = _load(args, cwd)
    for name in _split(args.kernel) or list(specs):
        if name in specs:
            spec = specs[name]
            out.write(f"# {spec.name} v{spec.version}: {spec.description}\n")
    for case in _cases(args, config, specs):
        out.write(case.id + "\n")
    return 0


def cmd_schema(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    from ci_bench.schema import Results

    out.write(json.dumps(Results.model_json_schema(), indent=2) + "\n")
    return 0


COMMANDS = {"run": cmd_run, "list": cmd_list, "schema": cmd_schema}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the documented exit code (README, "Exit codes")."""
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args, os.environ, Path.cwd(), sys.stdout)
    except (CiBenchError, SelectionError, SpecError) as exc:
        code = exc.exit_code if isinstance(exc, CiBenchError) else ExitCode.USAGE
        sys.stderr.write(f"ci-bench: error: {exc}\n")
        return int(code)
    except KeyboardInterrupt:
        sys.stderr.write("ci-bench: interrupted; results measured so far were saved\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
