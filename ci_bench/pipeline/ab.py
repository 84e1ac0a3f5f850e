"""The A/B against the base: each case's head and base kernels measured as a pair, round by
round on the same inputs, in worker processes; judged on paired ratios; flagged cases
measured again as pairs before the verdict is final.

The base is resolved first, before anything is measured: a base that is not in the clone
is a one-line error, not a surprise after the baseline measurement.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path

from ci_bench.contract.spec import KernelSpec
from ci_bench.errors import InputError
from ci_bench.judge.ab import ab_report
from ci_bench.judge.pr import with_run_states
from ci_bench.measure.kernel_process import KernelCodeError, KernelProcess
from ci_bench.pipeline.config import load_config
from ci_bench.pipeline.git import merge_base, resolve_commit, toplevel, worktree
from ci_bench.pipeline.kernels import HeadKernels, base_side, describe_base
from ci_bench.pipeline.measuring import (
    BaseCheckout,
    Runs,
    base_side_failures,
    confirmed,
    measure_pairs,
    remeasure,
    worker_runs,
)
from ci_bench.pipeline.parts import AbBase
from ci_bench.pipeline.request import Request
from ci_bench.pipeline.session import Bench, open_bench
from ci_bench.pipeline.sources import compare_sides, with_sources
from ci_bench.schema import Report, RunState

OpenRuns = Callable[[Bench, BaseCheckout | None], AbstractContextManager[Runs]]


def resolve_base(root: Path, base: AbBase | None) -> tuple[str, str]:
    """(how the base is named, its commit): the merge base for a pull request."""
    if base is None:
        raise InputError("A/B mode needs a base: --base REF, or a pull request's base commit")
    if base.kind == "merge-base":
        sha = merge_base(root, "HEAD", base.ref)
        tip = resolve_commit(root, base.ref, "A/B base")
        moved = "" if tip == sha else f"; the base branch is at {tip[:12]}"
        return f"merge base {sha[:12]}{moved}", sha
    if base.kind == "default-branch":
        for ref in (f"origin/{base.ref}", base.ref):
            with contextlib.suppress(InputError):
                return f"{base.ref} (the default branch)", resolve_commit(root, ref, "A/B base")
        raise InputError(
            f"A/B base: the default branch {base.ref!r} is not in this clone "
            "(check out with fetch-depth: 0, or give the dispatch a base)"
        )
    return base.ref, resolve_commit(root, base.ref, "A/B base")


def _base_modules(folder: Path, request: Request) -> list[str]:
    """The base's own kernel list (its pyproject), plus any --kernel-module given."""
    pyproject = folder / "pyproject.toml"
    modules = list(load_config(pyproject, folder).kernels) if pyproject.is_file() else []
    extra = [m for m in request.modules if m not in request.config.kernels]
    return list(dict.fromkeys([*modules, *extra]))


@contextlib.contextmanager
def base_checkout(
    request: Request, name: str, sha: str, process: KernelProcess, head: HeadKernels
) -> Iterator[BaseCheckout]:
    """The base commit checked out beside this one, its kernels described by ``process``
    (imported there beside the head's). A base whose modules hang or crash while imported
    is no error of the pull request: each of the head's kernels is then measured on the
    head alone, and the checkout says why (``failed``); a module that raises (one the pull
    request adds, a broken one) costs its own kernels' pairs alone."""
    head_tree = toplevel(request.config.root)
    with worktree(request.config.root, sha) as folder:
        tree = toplevel(folder)
        modules = tuple(_base_modules(folder, request))
        checkout = BaseCheckout(folder, modules, name, sha, {}, tree, head_tree)
        try:
            specs, broken = describe_base(process, checkout.where, base_side(name))
        except KernelCodeError as exc:
            process.close(kill=True)  # half-imported: the pool starts clean workers
            why = f"{exc}; head measured alone"
            failed = dict.fromkeys(head.specs, why)
            yield dataclasses.replace(checkout, failed=failed, unloadable=True)
            return
        loaded = tuple(m for m in modules if m not in broken)  # what a worker imports
        failed = {
            kernel: f"{broken[module]}; head measured alone"
            for kernel, module in head.origin.items()
            if module in broken and kernel not in specs
        }
        yield dataclasses.replace(checkout, specs=specs, modules=loaded, failed=failed)


def run_ab(
    request: Request,
    head: HeadKernels,
    env: Mapping[str, str],
    *,
    base: tuple[str, str] | None = None,
    open_runs: OpenRuns = worker_runs,
) -> Report:
    """Measure head against the request's base and judge; flagged cases re-measured.

    ``head``: the head's kernels, described by the worker that measures first (the base's
    are described, and both sides traced, in it too). ``base`` is the already resolved
    (name, commit), when the caller resolved it early.
    """
    name, sha = base or resolve_base(request.config.root, request.base)
    specs = head.specs
    bench = open_bench(
        request,
        specs,
        env,
        harness=request.ab_harness,
        device=head.device,
        process=head.process,
    )
    with base_checkout(request, name, sha, head.process, head) as checkout:
        known = set(checkout.specs) | set(checkout.failed)  # loaded, or failed while loaded
        if not checkout.unloadable and not known & set(specs):
            raise InputError(f"{checkout.label} has none of the kernels {', '.join(specs)}")
        # Which code each side runs, proved before anything is timed (issue 37).
        seed, chips = request.harness.seed, request.config.target_chips
        sides = compare_sides(head.process, request, checkout, bench.cases, seed, chips)
        checkout = dataclasses.replace(checkout, failed={**checkout.failed, **sides.failed})
        for state in sides.states:
            bench.progress.note(f"same code on both sides: {state.reason}")
        for why in dict.fromkeys(checkout.failed.values()):
            bench.progress.note(why)
        with open_runs(bench, checkout) as runs:
            results, bases = measure_pairs(bench, runs, checkout)
            results, bases = base_side_failures(bench, runs, results, bases)

            def judge() -> Report:
                return ab_report(
                    results,
                    bases,
                    checkout.label,
                    request.thresholds,
                    request.policy,
                    target_chips=request.config.target_chips,
                    unpaired=checkout.failed,
                )

            def rejudge(ids: set[str]) -> Report:
                nonlocal results, bases
                paired = [c for c in results.cases if c.kernel in checkout.paired]
                heads, bases = remeasure(bench, runs, paired, ids, base=checkout, bases=bases)
                by_id = {c.id: c for c in heads}
                cases = [by_id.get(c.id, c) for c in results.cases]
                results = results.model_copy(update={"cases": cases})
                return judge()

            report = confirmed(judge(), rejudge, request.confirm)
        if request.config.unit_metrics:  # the pool has let the chip go
            from ci_bench.pipeline.profiling import with_unit_metrics

            report = with_unit_metrics(report, request, env, head.device, checkout.where)
    report = with_sources(report, sides)
    return with_run_states(report, [*sides.states, *removed_kernels(checkout.specs, specs)])


def removed_kernels(
    base: Mapping[str, KernelSpec], head: Mapping[str, KernelSpec]
) -> list[RunState]:
    """Kernels the merge base measures that this head's config no longer lists: a run-level
    note that fails by default (``fail-on.kernel-removed``), never a silent loss."""
    return [
        RunState(
            state="kernel-removed",
            reason=f"{name}: measured at the merge base, not in this PR's config",
        )
        for name in sorted(set(base) - set(head))
    ]
