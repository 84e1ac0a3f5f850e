"""``ci-bench ab --base REF``: head and base kernels measured in ONE process, interleaved.

A TPU admits one process, and separate runs drift apart; so the base ref is checked out in
a temporary git worktree, its kernel modules are imported under their own names (the head's
modules are set aside meanwhile), and each case times both on the same inputs, round by
round in a shuffled order.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import random
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from ci_bench.commands.compare import emit_report, parse_fail_on
from ci_bench.commands.config import Config, load_config
from ci_bench.commands.run import harness_settings, load_project, selected_cases, split_list
from ci_bench.contract.registry import load_kernels
from ci_bench.contract.spec import KernelSpec
from ci_bench.errors import InputError
from ci_bench.judge.ab import ab_report
from ci_bench.report.render import markdown_report
from ci_bench.schema import CaseResult, Report, Results
from ci_bench.store.files import atomic_write_text, dump_model


def _git(root: Path, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(f"git {' '.join(args)}: {exc}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise InputError(f"git {' '.join(args)}: {last}")
    return done.stdout.strip()


@contextlib.contextmanager
def worktree(root: Path, ref: str) -> Iterator[tuple[Path, str]]:
    """A detached checkout of ``ref`` in a temporary folder, removed afterwards."""
    top = Path(_git(root, "rev-parse", "--show-toplevel"))
    sha = _git(top, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    folder = Path(tempfile.mkdtemp(prefix="ci-bench-base-"))
    _git(top, "worktree", "add", "--detach", "--force", str(folder), sha)
    try:
        yield folder / root.resolve().relative_to(top), sha
    finally:
        with contextlib.suppress(InputError):
            _git(top, "worktree", "remove", "--force", str(folder))


def load_isolated(folder: Path, modules: Sequence[str]) -> Mapping[str, KernelSpec]:
    """Import kernel modules from ``folder`` without disturbing the head's copies.

    The head's modules of the same top-level packages are set aside, the base's are
    imported, then the head's are put back. Functions keep their own module globals, so the
    base SPECs keep working; ci_bench itself is shared, so both obey one contract.
    """
    tops = {m.split(".")[0] for m in modules}

    def ours(name: str) -> bool:
        return name.split(".")[0] in tops

    saved = {n: m for n, m in sys.modules.items() if ours(n)}
    for name in saved:
        del sys.modules[name]
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    try:
        return load_kernels(modules)
    finally:
        sys.path.remove(str(folder))
        for name in [n for n in sys.modules if ours(n)]:
            del sys.modules[name]
        sys.modules.update(saved)


def _base_modules(folder: Path, args: argparse.Namespace) -> list[str]:
    base_config = (
        load_config(folder / "pyproject.toml", folder)
        if (folder / "pyproject.toml").is_file()
        else None
    )
    modules = list(base_config.kernels) if base_config else []
    return list(dict.fromkeys([*modules, *split_list(args.kernel_module)]))


def measure_ab(
    args: argparse.Namespace,
    config: Config,
    head: Mapping[str, KernelSpec],
    base: Mapping[str, KernelSpec],
    env: Mapping[str, str],
) -> tuple[Results, list[CaseResult]]:
    """Every selected case, head against base where the base has the kernel."""
    from ci_bench.measure.harness import NOT_MEASURED, run_case, run_contestants
    from ci_bench.measure.progress import Progress

    cases = selected_cases(args, config, head)
    settings, meta, peaks = harness_settings(args, config, head, cases, env)
    rng = random.Random(settings.seed)
    progress = Progress(sys.stderr, live=sys.stderr.isatty(), quiet=args.quiet)
    heads: list[CaseResult] = []
    bases: list[CaseResult] = []
    for index, case in enumerate(cases, start=1):
        progress.start(index, len(cases), case)
        other = base.get(case.kernel)
        if other is None:
            heads.append(run_case(head[case.kernel], case, settings, peaks))
        else:
            mine, theirs = run_contestants(
                [head[case.kernel], other], case, settings, peaks, rng=rng
            )
            if (mine.error or "").startswith(NOT_MEASURED):  # the base failed: head alone
                mine = run_case(head[case.kernel], case, settings, peaks)
            heads.append(mine)
            bases.append(theirs)
        progress.done(index, len(cases), heads[-1])
    from ci_bench.measure.runner import utc_now

    meta = meta.model_copy(update={"finished_at": utc_now(), "complete": True})
    return Results(meta=meta, cases=heads), bases


def confirm(
    args: argparse.Namespace,
    config: Config,
    head: Mapping[str, KernelSpec],
    base: Mapping[str, KernelSpec],
    results: Results,
    bases: list[CaseResult],
    ids: set[str],
    env: Mapping[str, str],
) -> tuple[Results, list[CaseResult]]:
    """Re-measure flagged cases, interleaved with the base again; keep both measurements."""
    from ci_bench.measure.harness import run_contestants

    cases = [c for c in selected_cases(args, config, head) if c.id in ids]
    settings, _, peaks = harness_settings(args, config, head, cases, env)
    rng = random.Random(settings.seed + 1)
    again = {}
    for case in cases:
        mine, theirs = run_contestants(
            [head[case.kernel], base[case.kernel]], case, settings, peaks, rng=rng
        )
        if mine.status == "ok" and theirs.status == "ok":
            again[case.id] = (mine.pallas, theirs.pallas)
    heads = [
        c.model_copy(update={"confirmation": again[c.id][0]}) if c.id in again else c
        for c in results.cases
    ]
    new_bases = [
        c.model_copy(update={"confirmation": again[c.id][1]}) if c.id in again else c for c in bases
    ]
    return results.model_copy(update={"cases": heads}), new_bases


def run_ab(
    args: argparse.Namespace,
    config: Config,
    head: Mapping[str, KernelSpec],
    ref: str,
    env: Mapping[str, str],
) -> Report:
    """Measure head against ``ref`` and judge; flagged cases are re-measured once."""
    policy = parse_fail_on(args.fail_on, config.fail_on)
    if args.repeats is None:
        args.repeats = config.ab_repeats
    with worktree(config.root, ref) as (folder, sha):
        base = load_isolated(folder, _base_modules(folder, args))
        if not set(base) & set(head):
            raise InputError(f"{ref} ({sha[:12]}) has none of the kernels {', '.join(head)}")
        base_ref = f"{ref} ({sha[:12]})"
        results, bases = measure_ab(args, config, head, base, env)
        report = ab_report(results, bases, base_ref, config.thresholds, policy)
        flagged = {v.id for v in report.cases if v.verdict == "regression"}
        if flagged and not getattr(args, "no_confirm", False):
            sys.stderr.write(f"ci-bench: re-measuring {len(flagged)} flagged case(s)\n")
            results, bases = confirm(args, config, head, base, results, bases, flagged, env)
            report = ab_report(results, bases, base_ref, config.thresholds, policy)
    return report


def cmd_ab(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    config, head = load_project(args, cwd)
    args.shape, args.dtype = None, "bfloat16"
    report = run_ab(args, config, head, args.base, env)
    if args.output:
        atomic_write_text(args.output, dump_model(report))
    if args.markdown:
        atomic_write_text(args.markdown, markdown_report(report))
    emit_report(report, args.format, out)
    return report.exit_code
