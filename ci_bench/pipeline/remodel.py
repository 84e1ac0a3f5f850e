"""Baseline entries modelled again by this ci-bench's cost model, their measurements kept.

Each entry is modelled from the kernel code of the commit that was measured (its provenance
``commit``, or ``--at``), checked out beside this one and modelled in a worker as the A/B's
base is (``pipeline.ab.base_checkout``): no kernel code runs in this process. Only entries
measured on this kind of machine (platform and device kind) are modelled: on a TPU the model
reads the chip's own layouts (``measure.chip.stored_layouts``), so another machine would
write other figures than its runs will. The worker is the measuring one (pinned to the
host's accelerator) and models the chips a run models (``runner.model_chips``), so the
figures are the ones a run here writes. With ``deviceless`` a host without a TPU models the
entries of that chip instead, its worker asking libtpu for the chip's layouts
(``measure.deviceless``): the figures the chip's own run writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ci_bench import __version__
from ci_bench.contract.spec import Case
from ci_bench.errors import CiBenchError, InputError
from ci_bench.measure import deviceless as deviceless_edge
from ci_bench.pipeline.ab import base_checkout
from ci_bench.pipeline.analysis import model_cases
from ci_bench.pipeline.git import resolve_commit
from ci_bench.pipeline.kernels import HeadKernels, base_side, head_kernels
from ci_bench.pipeline.request import Request
from ci_bench.schema import BaselineEntry, BaselineFile, DeviceFingerprint
from ci_bench.schema.baseline import Remodelled
from ci_bench.schema.model import MODEL_REVISION, TPU_DEVICE_KINDS
from ci_bench.schema.withheld import WithheldModel
from ci_bench.store.baselines import baseline_files, load_baseline
from ci_bench.store.remodel import Remodel, remodel_entry, write_remodel

_SIDE = "ci_bench.measure.kernel_side"


@dataclass(frozen=True)
class EntryOutcome:
    """What became of one entry of one baseline file: its ``remodel``, or why it was left
    (``refused``: for a reason of its own, not for being another machine's)."""

    path: Path
    device: str
    commit: str | None  # the commit modelled
    remodel: Remodel | None
    left: str | None = None
    refused: bool = False


def machine_kind(device: DeviceFingerprint) -> str:
    """What the model depends on of a machine: platform and device kind (a TPU's layouts);
    not the CPU model, which moves a CPU's timings, never its model. ``cpu`` for a CPU."""
    kind = device.device_kind
    return device.platform if kind == device.platform else f"{device.platform}:{kind}"


def _cases(entry: BaselineEntry) -> list[Case]:
    """The entry's cases as the model takes them (kernel, parameters, dtype, mode)."""
    return [Case(c.kernel, c.params, c.dtype, c.mode) for c in entry.cases]


def _commit(request: Request, entry: BaselineEntry, at: str | None) -> str:
    """The commit whose kernels model ``entry``: ``at``, else the one it was measured at.
    An entry measured with uncommitted changes has no such commit: the one an earlier
    ``--at`` remodelled it from, else none (``--at`` is needed)."""
    provenance = entry.provenance
    ref = at or provenance.commit
    if ref is None:
        raise InputError("it records no commit: give --at REF, the commit that was measured")
    if at is None and provenance.dirty:
        if provenance.remodelled is None:
            raise InputError(
                f"it was measured with uncommitted changes on {ref[:12]}, so no commit holds "
                "the code measured: give --at REF, a commit that does"
            )
        ref = provenance.remodelled.commit  # named by an earlier --at
    what = "--at" if at else "its measured commit"
    return resolve_commit(request.config.root, ref, what)


def _model_entry(
    request: Request,
    head: HeadKernels,
    baseline: BaselineFile,
    entry: BaselineEntry,
    sha: str,
    *,
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
                f"kernel {kernel} is not among the kernels at {sha[:12]}"
                + (f" ({why})" if why else "")
            )
        version = checkout.specs[kernel].version
        if version != baseline.version:
            raise InputError(
                f"at {sha[:12]} kernel {kernel} is version {version}, the baseline "
                f"{baseline.version}: give --at the commit that was measured"
            )
        seed, factor = entry.settings.seed, request.harness.cost_model_factor
        models, _ = model_cases(
            head.process,
            _cases(entry),
            lambda _: (f"{_SIDE}:model_base_as_run", checkout.where, seed, factor),
            base_side(name),
            progress,
            tolerant=False,
        )
    withheld = {i: WithheldModel.model_validate(m.model_dump()) for i, m in models.items()}
    info = Remodelled(
        commit=sha, revision=MODEL_REVISION, remodelled_at=now, tool_version=__version__
    )
    return remodel_entry(entry, withheld, info)


def _files(paths: Sequence[Path]) -> list[Path]:
    """The baseline files named, a folder standing for every baseline file in it (the tuned
    configs beside them are not baselines)."""
    files = [f for path in paths for f in (baseline_files(path) if path.is_dir() else [path])]
    if not files:
        raise InputError(f"no baseline file in {', '.join(map(str, paths))}")
    return files


@dataclass(frozen=True)
class _Session:
    """What every entry is modelled with: the request, the head's worker, the machine kind
    it models (``here``; a chip's name with ``deviceless``), ``--at``, whether to write, the
    time recorded, the progress line."""

    request: Request
    head: HeadKernels
    here: str
    deviceless: str | None
    at: str | None
    write: bool
    now: datetime
    progress: Callable[[str], None]

    def models(self, device: DeviceFingerprint) -> bool:
        """Whether an entry measured on ``device`` is modelled here as its run modelled it."""
        if self.deviceless is None:
            return machine_kind(device) == self.here
        kind = TPU_DEVICE_KINDS.get(device.device_kind.strip())
        return device.platform == "tpu" and kind == self.deviceless

    def elsewhere(self, device: DeviceFingerprint) -> str:
        """Why an entry of another machine is left."""
        kind = machine_kind(device)
        if self.deviceless is None:
            return f"measured on {kind}, this machine is {self.here}: remodel it there"
        return f"measured on {kind}, not a {self.deviceless}: remodel it there"


def remodel_baselines(
    request: Request,
    paths: Sequence[Path],
    env: Mapping[str, str],
    *,
    at: str | None,
    write: bool,
    now: datetime,
    progress: Callable[[str], None],
    report: Callable[[EntryOutcome], None],
    deviceless: str | None = None,
) -> list[EntryOutcome]:
    """Every entry of ``paths`` measured on this kind of machine (or, with ``deviceless``,
    on that TPU chip), modelled again, each outcome handed to ``report`` as it comes;
    written back (each file under the store's lock) when ``write`` and a model changed. An
    entry that cannot be modelled or written is left, said why; the others still are."""
    baselines = {path: load_baseline(path) for path in _files(paths)}  # all read first
    head = head_kernels(
        request, deviceless_edge.worker_environment(env, deviceless), measuring=True
    )
    assert head.device is not None  # measuring: the host's device was read
    here = deviceless or machine_kind(head.device)
    session = _Session(request, head, here, deviceless, at, write, now, progress)
    outcomes: list[EntryOutcome] = []
    with head.process:
        for path, baseline in baselines.items():
            for entry in baseline.entries:
                outcomes.append(_one(session, path, baseline, entry))
                report(outcomes[-1])
    return outcomes


def _one(
    session: _Session, path: Path, baseline: BaselineFile, entry: BaselineEntry
) -> EntryOutcome:
    """One entry modelled (and written), or left with why."""
    device = entry.device.identity
    if not session.models(entry.device):
        return EntryOutcome(path, device, None, None, session.elsewhere(entry.device))
    try:
        sha = _commit(session.request, entry, session.at)
        session.progress(f"{path.name} ({device}): {len(entry.cases)} cases at {sha[:12]}")
        remodel = _model_entry(
            session.request,
            session.head,
            baseline,
            entry,
            sha,
            now=session.now,
            progress=session.progress,
        )
        if session.write and remodel.action == "remodelled":
            write_remodel(path, entry, remodel)
    except CiBenchError as exc:  # this entry's own (a hang too): the others are still modelled
        why = str(exc).removeprefix(f"{path}: ")
        return EntryOutcome(path, device, None, None, why, refused=True)
    return EntryOutcome(path, device, sha, remodel)
