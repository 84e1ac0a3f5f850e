"""``ci-bench run``, ``list`` and ``schema``: measure the matrix and describe it."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ci_bench import __version__
from ci_bench.commands.config import Config, load_config, resolve
from ci_bench.contract.matrix import Shard, expand, select, shard
from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.errors import InputError
from ci_bench.schema import Results, RunMeta, RunSettings
from ci_bench.store.files import atomic_write_text, dump_model

if TYPE_CHECKING:  # the harness imports jax: only commands that measure load it
    from ci_bench.measure.harness import HarnessSettings, PeakLookup


def split_list(values: Sequence[str]) -> list[str]:
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def load_project(args: argparse.Namespace, cwd: Path) -> tuple[Config, Mapping[str, KernelSpec]]:
    from ci_bench.contract.registry import load_kernels

    config = load_config(args.config, cwd)
    modules = [*config.kernels, *split_list(args.kernel_module)]
    if not modules:
        raise InputError("no kernels configured: add kernels to [tool.ci-bench] or --kernel-module")
    return config, load_kernels(dict.fromkeys(modules), root=config.root)


def _cases(args: argparse.Namespace, config: Config, specs: Mapping[str, KernelSpec]) -> list[Case]:
    kernels = split_list(args.kernel)
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


def selected_cases(
    args: argparse.Namespace, config: Config, specs: Mapping[str, KernelSpec]
) -> list[Case]:
    """The selection (--kernel, --case, --profile or --shape) and this runner's shard of it."""
    part = Shard.parse(args.shard) if args.shard else None
    return shard(_cases(args, config, specs), part)


def harness_settings(
    args: argparse.Namespace,
    config: Config,
    specs: Mapping[str, KernelSpec],
    cases: Sequence[Case],
    env: Mapping[str, str],
) -> tuple[HarnessSettings, RunMeta, PeakLookup]:
    """Validated measurement settings, the run's metadata and the device's peaks."""
    from ci_bench.commands.git import git_info
    from ci_bench.measure.devices import fingerprint
    from ci_bench.measure.harness import Adaptive, HarnessSettings
    from ci_bench.measure.runner import peak_lookup, utc_now

    for name, value in (("--warmup", args.warmup), ("--repeats", args.repeats)):
        if value is not None and value < (1 if name == "--repeats" else 0):
            raise InputError(f"{name} must be {'>= 1' if name == '--repeats' else '>= 0'}")
    for name, value in (("--peak-tflops", args.peak_tflops), ("--peak-gbps", args.peak_gbps)):
        if value is not None and not value > 0:
            raise InputError(f"{name} must be positive")
    target = args.adaptive if args.adaptive is not None else config.adaptive_target
    max_seconds = args.max_time if args.max_time is not None else config.adaptive_max_seconds
    if target is not None and not 0 < target < 1:
        raise InputError("--adaptive wants a relative width between 0 and 1, e.g. 0.01")
    if max_seconds <= 0:
        raise InputError("--max-time must be positive")
    adaptive = Adaptive(target=target, max_seconds=max_seconds) if target else None
    settings = HarnessSettings(
        warmup=config.warmup if args.warmup is None else args.warmup,
        repeats=config.repeats if args.repeats is None else args.repeats,
        seed=config.seed if args.seed is None else args.seed,
        cost_model_factor=config.cost_model_factor,
        adaptive=adaptive,
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
        shard=args.shard and str(Shard.parse(args.shard)),
        case_globs=[] if args.shape else list(args.case),
        adhoc=bool(args.shape),
        git=git_info(config.root, env.get("GITHUB_SHA"), env.get("GITHUB_REF")),
        device=device,
        settings=RunSettings(
            warmup=settings.warmup,
            repeats=settings.repeats,
            adaptive_target=adaptive.target if adaptive else None,
            adaptive_max_seconds=adaptive.max_seconds if adaptive else None,
            seed=settings.seed,
            interpret=device.platform == "cpu",
            compilation_cache=str(cache_dir) if cache_dir else None,
        ),
        kernels={name: specs[name].version for name in dict.fromkeys(c.kernel for c in cases)},
    )
    return settings, meta, peak_lookup(device, args.peak_tflops, args.peak_gbps)


def measure(
    args: argparse.Namespace,
    config: Config,
    specs: Mapping[str, KernelSpec],
    env: Mapping[str, str],
) -> Results:
    """Expand the selection in ``args``, measure it and save to ``args.output`` as it goes."""
    from ci_bench.measure.progress import Progress
    from ci_bench.measure.runner import run_all

    cases = selected_cases(args, config, specs)
    settings, meta, peaks = harness_settings(args, config, specs, cases, env)
    progress = Progress(sys.stderr, live=sys.stderr.isatty(), quiet=args.quiet)
    output = args.output

    def save(results: Results) -> None:
        if output is not None:
            atomic_write_text(output, dump_model(results))

    if not cases:
        progress.note("the selection is empty: nothing to measure")
    results = run_all(specs, cases, settings, meta, peaks, progress=progress, save=save)
    if output is not None:
        progress.note(f"results written to {output}")
    return results


def remeasure(
    args: argparse.Namespace,
    config: Config,
    specs: Mapping[str, KernelSpec],
    results: Results,
    ids: set[str],
    env: Mapping[str, str],
) -> Results:
    """The confirmation pass: measure flagged cases once more and keep both measurements."""
    from ci_bench.measure.harness import run_case

    cases = [c for c in selected_cases(args, config, specs) if c.id in ids]
    settings, _, peaks = harness_settings(args, config, specs, cases, env)
    again = {}
    for case in cases:
        sys.stderr.write(f"ci-bench: re-measuring {case.id}\n")
        result = run_case(specs[case.kernel], case, settings, peaks)
        if result.status == "ok":
            again[case.id] = result.pallas
    cases_out = [
        c.model_copy(update={"confirmation": again[c.id]}) if c.id in again else c
        for c in results.cases
    ]
    return results.model_copy(update={"cases": cases_out})


def cmd_run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    from ci_bench.measure.runner import run_exit_code
    from ci_bench.report.render import results_table, run_summary

    config, specs = load_project(args, cwd)
    results = measure(args, config, specs, env)
    if args.format == "json":
        out.write(dump_model(results))
    else:
        out.write(results_table(results.cases, "github" if args.format == "markdown" else "simple"))
        out.write("\n\n" + run_summary(results) + "\n")
    return int(run_exit_code(results, config.fail_on.error))


def cmd_list(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    config, specs = load_project(args, cwd)
    for name in split_list(args.kernel) or list(specs):
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
