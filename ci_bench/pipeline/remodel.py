"""Baseline entries modelled again by this ci-bench's cost model, their measurements kept.

Each entry is modelled from the kernel code of the commit that was measured (its provenance
``commit``, or ``--at``), checked out beside this one and modelled in a worker as the A/B's
base is (``pipeline.ab.base_checkout``): no kernel code runs in this process. Only the entries
measured on this kind of machine are modelled: on a TPU the model reads the chip's own
layouts (``measure.chip.stored_layouts``), so a CPU would model another chip's cases with
other figures than its runs will. The worker is the measuring one (pinned to the host's
accelerator), so the figures are the ones a run here writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ci_bench import __version__
from ci_bench.contract.spec import Case
from ci_bench.errors import InputError
from ci_bench.pipeline.ab import base_checkout
from ci_bench.pipeline.analysis import model_cases
from ci_bench.pipeline.git import resolve_commit
from ci_bench.pipeline.kernels import HeadKernels, base_side, head_kernels
from ci_bench.pipeline.request import Request
from ci_bench.schema import BaselineEntry, BaselineFile
from ci_bench.schema.baseline import Remodelled
from ci_bench.schema.chips import CHIP_NAMES
from ci_bench.schema.withheld import WithheldModel
from ci_bench.store.baselines import baseline_files, load_baseline
from ci_bench.store.remodel import Remodel, remodel_entry, write_remodel

_SIDE = "ci_bench.measure.kernel_side"


@dataclass(frozen=True)
class EntryOutcome:
    """What became of one entry of one baseline file."""

    path: Path
    device: str
    commit: str | None  # the commit modelled; None: left as it was
    remodel: Remodel | None
    left: str | None = None  # why the entry was not modelled here
    refused: bool = False  # left for a reason of its own (no commit, another version)


def _cases(entry: BaselineEntry) -> list[Case]:
    return [Case(c.kernel, c.params, c.dtype, c.mode) for c in entry.cases]


def _chips(entry: BaselineEntry) -> tuple[str, ...]:
    """Every TPU chip this model knows, and any other target the entry's models had (a GPU
    runner's own GPU): the chips a run adds its models for (``measure.runner.with_model``)."""
    had = [chip for case in entry.cases if case.model for chip in case.model.chips]
    return tuple(dict.fromkeys([*CHIP_NAMES, *had]))


def _commit(request: Request, entry: BaselineEntry, at: str | None, path: Path) -> str:
    ref = at or entry.provenance.commit
    if ref is None:
        raise InputError(
            f"{path}: the {entry.device.identity} entry records no commit: "
            "give --at REF, the commit that was measured"
        )
    return resolve_commit(request.config.root, ref, f"{path.name} (the measured commit)")


def _model_entry(
    request: Request,
    head: HeadKernels,
    baseline: BaselineFile,
    entry: BaselineEntry,
    sha: str,
    *,
    path: Path,
    now: datetime,
    progress: Callable[[str], None],
) -> Remodel:
    """``entry``'s cases modelled from the kernel code at ``sha``."""
    name = f"{sha[:12]} (measured)"
    kernel = baseline.kernel
    with base_checkout(request, name, sha, head.process, head) as checkout:
        if kernel not in checkout.specs:
            why = checkout.failed.get(kernel, "")
            raise InputError(
                f"{path}: kernel {kernel} is not among the kernels at {sha[:12]}"
                + (f" ({why})" if why else "")
            )
        version = checkout.specs[kernel].version
        if version != baseline.version:
            raise InputError(
                f"{path}: at {sha[:12]} kernel {kernel} is version {version}, the baseline "
                f"{baseline.version}: give --at the commit that was measured"
            )
        seed, factor = entry.settings.seed, request.harness.cost_model_factor
        chips = _chips(entry)
        models, _ = model_cases(
            head.process,
            _cases(entry),
            lambda _: (f"{_SIDE}:model_base", checkout.where, chips, seed, factor),
            base_side(name),
            progress,
            tolerant=False,
        )
    withheld = {i: WithheldModel.model_validate(m.model_dump()) for i, m in models.items()}
    revision = next((m.revision for m in withheld.values() if m.revision is not None), 0)
    info = Remodelled(commit=sha, revision=revision, remodelled_at=now, tool_version=__version__)
    return remodel_entry(entry, withheld, info)


def remodel_baselines(
    request: Request,
    paths: Sequence[Path],
    env: Mapping[str, str],
    *,
    at: str | None,
    write: bool,
    now: datetime,
    progress: Callable[[str], None],
) -> list[EntryOutcome]:
    """Every entry of ``paths`` (baseline files, or folders of them: the tuned configs
    beside them are not baselines) measured on this kind of machine, modelled again;
    written back (each file under the store's lock) when ``write`` and a model changed."""
    files = [f for path in paths for f in (baseline_files(path) if path.is_dir() else [path])]
    if not files:
        raise InputError(f"no baseline file in {', '.join(map(str, paths))}")
    baselines = {path: load_baseline(path) for path in files}  # all read before any work
    head = head_kernels(request, env, measuring=True)
    assert head.device is not None  # measuring: the host's device was read
    here = head.device.identity
    outcomes: list[EntryOutcome] = []
    with head.process:
        for path, baseline in baselines.items():
            for entry in baseline.entries:
                device = entry.device.identity
                if device != here:
                    why = f"measured on {device}, this machine is {here}: remodel it there"
                    outcomes.append(EntryOutcome(path, device, None, None, why))
                    continue
                try:
                    sha = _commit(request, entry, at, path)
                    progress(f"{path.name} ({device}): {len(entry.cases)} cases at {sha[:12]}")
                    remodel = _model_entry(
                        request, head, baseline, entry, sha, path=path, now=now, progress=progress
                    )
                except InputError as exc:  # this entry's own: the others are still modelled
                    why = str(exc).removeprefix(f"{path}: ")
                    outcomes.append(EntryOutcome(path, device, None, None, why, refused=True))
                    continue
                if write and remodel.action == "remodelled":
                    write_remodel(path, baseline, remodel)
                outcomes.append(EntryOutcome(path, device, sha, remodel))
    return outcomes
