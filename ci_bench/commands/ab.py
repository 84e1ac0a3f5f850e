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
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TextIO

from ci_bench.commands.bench import Bench, confirmed, load_specs, open_bench, remeasure
from ci_bench.commands.compare import emit_report, write_report_files
from ci_bench.commands.config import load_config
from ci_bench.commands.git import git
from ci_bench.commands.request import Request
from ci_bench.commands.run import request_from
from ci_bench.contract.registry import load_kernels
from ci_bench.contract.spec import KernelSpec
from ci_bench.errors import InputError
from ci_bench.judge.ab import ab_report
from ci_bench.schema import CaseResult, Report, Results


@contextlib.contextmanager
def worktree(root: Path, ref: str) -> Iterator[tuple[Path, str]]:
    """A detached checkout of ``ref`` in a temporary folder, removed afterwards."""
    top = Path(git(root, "rev-parse", "--show-toplevel"))
    sha = git(top, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    folder = Path(tempfile.mkdtemp(prefix="ci-bench-base-"))
    git(top, "worktree", "add", "--detach", "--force", str(folder), sha)
    try:
        yield folder / root.resolve().relative_to(top), sha
    finally:
        with contextlib.suppress(InputError):
            git(top, "worktree", "remove", "--force", str(folder))


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


def _base_modules(folder: Path, request: Request) -> list[str]:
    """The base's own kernel list (its pyproject), plus any --kernel-module given."""
    pyproject = folder / "pyproject.toml"
    modules = list(load_config(pyproject, folder).kernels) if pyproject.is_file() else []
    extra = [m for m in request.modules if m not in request.config.kernels]
    return list(dict.fromkeys([*modules, *extra]))


def measure_ab(bench: Bench, base: Mapping[str, KernelSpec]) -> tuple[Results, list[CaseResult]]:
    """Every selected case, head against base where the base has the kernel."""
    from ci_bench.measure.harness import NOT_MEASURED, run_case, run_contestants

    settings, peaks, progress = bench.harness, bench.peaks, bench.progress
    rng = random.Random(settings.seed)
    heads: list[CaseResult] = []
    bases: list[CaseResult] = []
    for index, case in enumerate(bench.cases, start=1):
        progress.start(index, len(bench.cases), case)
        mine = bench.specs[case.kernel]
        other = base.get(case.kernel)
        if other is None:
            heads.append(run_case(mine, case, settings, peaks))
        else:
            head_result, base_result = run_contestants(
                [mine, other], case, settings, peaks, rng=rng
            )
            if (head_result.error or "").startswith(NOT_MEASURED):  # the base failed: head alone
                head_result = run_case(mine, case, settings, peaks)
            heads.append(head_result)
            bases.append(base_result)
        progress.done(index, len(bench.cases), heads[-1])
    return Results(meta=bench.finished(), cases=heads), bases


def run_ab(request: Request, head: Mapping[str, KernelSpec], env: Mapping[str, str]) -> Report:
    """Measure head against the request's base ref and judge; flagged cases re-measured."""
    ref = request.base_ref
    if ref is None:
        raise InputError("A/B mode needs a base: --base REF, or a pull request's base commit")
    bench = open_bench(request, head, env, harness=request.ab_harness, in_process=True)
    with worktree(request.config.root, ref) as (folder, sha):
        base = load_isolated(folder, _base_modules(folder, request))
        if not set(base) & set(head):
            raise InputError(f"{ref} ({sha[:12]}) has none of the kernels {', '.join(head)}")
        base_ref = f"{ref} ({sha[:12]})"
        results, bases = measure_ab(bench, base)

        def judge() -> Report:
            return ab_report(results, bases, base_ref, request.thresholds, request.policy)

        def rejudge(ids: set[str]) -> Report:
            nonlocal results, bases
            paired = [c for c in results.cases if c.kernel in base]
            heads, bases = remeasure(bench, [head, base], [paired, bases], ids, bench.harness)
            by_id = {c.id: c for c in heads}
            results = results.model_copy(
                update={"cases": [by_id.get(c.id, c) for c in results.cases]}
            )
            return judge()

        return confirmed(judge(), rejudge, request.confirm)


def cmd_ab(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    for flag in ("resume", "workers", "case_timeout"):
        if getattr(args, flag, None) is not None:
            # Head and base are timed round by round in ONE process (see the module
            # docstring); worker processes, time limits and resume are for `run` and `ci`.
            raise InputError(f"--{flag.replace('_', '-')} does not apply to ab: it runs in-process")
    request = request_from(args, cwd)
    report = run_ab(request, load_specs(request), env)
    write_report_files(report, request.output, args.markdown)
    emit_report(report, request.fmt, out)
    return report.exit_code
