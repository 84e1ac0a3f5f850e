"""Which code each side of an A/B ran, per kernel: the proof that two versions were compared.

Each kernel's subject is traced on both sides (``measure.sources``): the files its Pallas
kernels came from must be the head checkout's on one side and the base checkout's on the
other. The same file on both sides is the ``same-code`` run state: the kernel is imported
from outside the repository (site-packages, a vendored path), or an import got past the
isolation (``contract.isolation``); either way the A/B cannot see the change, and says so.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from ci_bench.contract.isolation import Tree
from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.measure.sources import Traced, traced_files
from ci_bench.pipeline.git import changed_files
from ci_bench.pipeline.measuring import BaseCheckout
from ci_bench.schema import KernelSources, Report, RunState, SourceFile


def _sha(path: str) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _shown(path: str, tree: Tree) -> str:
    return os.path.relpath(path, tree.root) if tree.holds(path) else path


def side_files(traced: Traced, tree: Tree) -> list[SourceFile]:
    """The side's traced files: every one inside its checkout, and the kernel's own outside
    it (a dependency's helper frames outside the repository are not the kernel)."""
    wanted = [f for f in traced.files if tree.holds(f) or f in traced.kernel]
    return [
        SourceFile(
            path=_shown(f, tree), inside=tree.holds(f), sha256=_sha(f), kernel=f in traced.kernel
        )
        for f in sorted(wanted)
    ]


def same_code(kernel: str, head: Traced, base: Traced, head_tree: Tree) -> RunState | None:
    """The run state when a file the kernel was traced from is the same on both sides."""
    shared = head.kernel & base.kernel or {f for f in head.files & base.files if head_tree.holds(f)}
    if not shared:
        return None
    outside = sorted(f for f in shared if not head_tree.holds(f))
    if outside:
        where = ", ".join(outside[:3])
        reason = (
            f"{kernel}: base and head both ran {where}, outside the repository: comparing "
            "them cannot see this pull request's change to it"
        )
    else:
        where = ", ".join(sorted(_shown(f, head_tree) for f in shared)[:3])
        reason = (
            f"{kernel}: the base ran the head's {where}: ci-bench could not isolate it "
            "(an import past its finder; please report it)"
        )
    return RunState(state="same-code", reason=reason)


def _first_cases(cases: Sequence[Case]) -> dict[str, Case]:
    first: dict[str, Case] = {}
    for case in cases:
        first.setdefault(case.kernel, case)
    return first


def compare_sides(
    head: Mapping[str, KernelSpec],
    checkout: BaseCheckout,
    cases: Sequence[Case],
    seed: int,
    chips: Sequence[str] = (),
) -> tuple[dict[str, KernelSources], list[RunState]]:
    """Per kernel both sides have: each side's files and the run states they call for."""
    head_tree, base_tree = Tree(str(checkout.head_tree)), Tree(str(checkout.tree))
    changed = changed_files(checkout.head_tree, checkout.sha)
    found: dict[str, KernelSources] = {}
    states: list[RunState] = []
    for kernel, case in _first_cases(cases).items():
        if kernel not in head or kernel not in checkout.specs:
            continue
        ours = traced_files(head[kernel], case, seed, chips)
        theirs = traced_files(checkout.specs[kernel], case, seed, chips)
        files = side_files(ours, head_tree)
        found[kernel] = KernelSources(
            head=files,
            base=side_files(theirs, base_tree),
            changed=sorted(f.path for f in files if f.inside and f.path in changed),
            error=ours.error or theirs.error,
        )
        state = same_code(kernel, ours, theirs, head_tree) if not found[kernel].error else None
        if state is not None:
            states.append(state)
    leaks = sorted(checkout.isolated.leaks)
    if leaks:
        states.append(
            RunState(
                state="same-code",
                reason=f"the base's code imported the head's {', '.join(leaks[:5])}: "
                "ci-bench could not isolate it (please report it)",
            )
        )
    return found, states


def with_sources(report: Report, sources: Mapping[str, KernelSources]) -> Report:
    """The report's kernels with the files each side ran."""
    kernels = [
        k.model_copy(update={"sources": sources[k.kernel]}) if k.kernel in sources else k
        for k in report.kernels
    ]
    return report.model_copy(update={"kernels": kernels})
