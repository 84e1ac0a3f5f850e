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
from dataclasses import dataclass, field
from pathlib import Path

from ci_bench.contract.isolation import Tree
from ci_bench.contract.spec import Case
from ci_bench.measure.kernel_process import KernelCodeError, KernelProcess
from ci_bench.measure.sources import Traced
from ci_bench.pipeline.git import changed_files, tracked_files
from ci_bench.pipeline.kernels import HEAD, base_side, leaks, root_of, trace
from ci_bench.pipeline.measuring import BaseCheckout
from ci_bench.pipeline.request import Request
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


def repository_copy(file: str, tracked: set[str], modules: Mapping[str, str]) -> str | None:
    """The repository's own file that ``file`` (outside it) was installed from, if any;
    ``modules``: where each traced file sits below its import root, in its worker."""
    below = modules.get(file)
    if below is None:
        return None
    return next((t for t in sorted(tracked) if t == below or t.endswith("/" + below)), None)


def _links_to(tree: Tree, tracked: str, file: str) -> bool:
    """The repository's ``tracked`` file is a symbolic link whose target is ``file``."""
    link = Path(tree.root) / tracked
    return link.is_symlink() and link.resolve() == Path(file).resolve()


@dataclass(frozen=True)
class Verdict:
    """For one kernel: a run state (the comparison cannot see the change) or a note."""

    state: RunState | None = None
    note: str | None = None


def same_code(
    kernel: str, head: Traced, base: Traced, head_tree: Tree, tracked: set[str]
) -> Verdict:
    """A file the kernel was traced from is the same on both sides: inside the head's
    checkout it is an isolation failure; outside it, an installed copy of a file the
    repository holds (the pull request's change to it cannot be measured), else a
    dependency the pull request cannot change (a note, not a failure)."""
    shared = head.kernel & base.kernel or {f for f in head.files & base.files if head_tree.holds(f)}
    leaked = sorted(_shown(f, head_tree) for f in shared if head_tree.holds(f))
    if leaked:
        reason = (
            f"{kernel}: the base ran the head's {', '.join(leaked[:3])}: ci-bench could not "
            "isolate it (an import past its finder; please report it)"
        )
        return Verdict(RunState(state="same-code", reason=reason))
    modules = {**base.modules, **head.modules}
    installed = [
        (f, copy) for f in sorted(shared) if (copy := repository_copy(f, tracked, modules))
    ]
    linked = [(f, copy) for f, copy in installed if _links_to(head_tree, copy, f)]
    if linked:
        file, copy = linked[0]
        reason = (
            f"{kernel}: the repository's {copy} is a symbolic link out of it (to {file}): "
            "base and head both ran that one file, so a change to it is no change of this "
            "pull request's and cannot be measured (keep the kernel's code in the repository)"
        )
        return Verdict(RunState(state="same-code", reason=reason))
    if installed:
        file, copy = installed[0]
        reason = (
            f"{kernel}: base and head both ran the installed {file}, not the repository's "
            f"{copy}: this pull request's change to it cannot be measured (install the package "
            "from the checkout: pip install -e .)"
        )
        return Verdict(RunState(state="same-code", reason=reason))
    if shared:
        where = ", ".join(sorted(shared)[:3])
        return Verdict(
            note=f"the kernel comes from outside the repository ({where}): the A/B compares "
            "this pull request's SPEC with the base's, never a change to that file"
        )
    return Verdict()


def _first_cases(cases: Sequence[Case]) -> dict[str, Case]:
    first: dict[str, Case] = {}
    for case in cases:
        first.setdefault(case.kernel, case)
    return first


@dataclass(frozen=True)
class Sides:
    """What each side ran (per kernel), the run states it calls for, notes per kernel;
    ``failed``: kernels whose base hung or crashed while traced (measured on the head
    alone), with why."""

    sources: dict[str, KernelSources]
    states: list[RunState]
    notes: dict[str, str]
    failed: dict[str, str] = field(default_factory=dict)


def compare_sides(
    process: KernelProcess,
    request: Request,
    checkout: BaseCheckout,
    cases: Sequence[Case],
    seed: int,
    chips: Sequence[str] = (),
) -> Sides:
    """Per kernel both sides have: each side's files, traced in ``process`` (a worker, under
    the case time limit), and what they say of the comparison. A head that hangs or crashes
    while traced is the pull request's error (``KernelCodeError``); a base that does is
    the base's: that kernel is measured on the head alone."""
    head_tree, base_tree = Tree(str(checkout.head_tree)), Tree(str(checkout.tree))
    changed = changed_files(checkout.head_tree, checkout.sha)
    tracked = tracked_files(checkout.head_tree)
    found = Sides({}, [], {})
    side = base_side(checkout.ref)
    for kernel, case in _first_cases(cases).items():
        if kernel not in checkout.paired:
            continue
        ours = Traced.from_json(trace(process, HEAD, case, seed, chips, head=root_of(request)))
        try:
            answer = trace(process, side, case, seed, chips, base=checkout.where)
        except KernelCodeError as exc:
            found.failed[kernel] = f"{exc}; head measured alone"
            continue
        theirs = Traced.from_json(answer)
        files = side_files(ours, head_tree)
        found.sources[kernel] = KernelSources(
            head=files,
            base=side_files(theirs, base_tree),
            changed=sorted(f.path for f in files if f.inside and f.path in changed),
            error=ours.error or theirs.error,
        )
        if found.sources[kernel].error:
            continue
        verdict = same_code(kernel, ours, theirs, head_tree, tracked)
        if verdict.state is not None:
            found.states.append(verdict.state)
        if verdict.note is not None:
            found.notes[kernel] = verdict.note
    leaked = leaks(process, checkout.where, side) if checkout.paired - set(found.failed) else []
    if leaked:
        found.states.append(
            RunState(
                state="same-code",
                reason=f"the base's code imported the head's {', '.join(leaked[:5])}: "
                "ci-bench could not isolate it (please report it)",
            )
        )
    return found


def with_sources(report: Report, sides: Sides) -> Report:
    """The report's kernels with the files each side ran and the notes on them."""
    kernels = []
    for k in report.kernels:
        update: dict[str, object] = {}
        if k.kernel in sides.sources:
            update["sources"] = sides.sources[k.kernel]
        if k.kernel in sides.notes:
            update["warnings"] = [*k.warnings, sides.notes[k.kernel]]
        kernels.append(k.model_copy(update=update) if update else k)
    return report.model_copy(update={"kernels": kernels})
