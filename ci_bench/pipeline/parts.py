"""The parts of a request (``pipeline.request.Request``): plain frozen values, one per
concern, so a reader takes the part it needs (where to write, which files are handed in,
how many workers) instead of thirty flat fields."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ci_bench.defaults import DTYPE
from ci_bench.schema.shard import Shard

BaseKind = Literal["merge-base", "ref", "default-branch"]


@dataclass(frozen=True)
class AbBase:
    """What the A/B measures the head against.

    ``merge-base``: the commit a pull request branched from (``ref`` is the PR's base
    commit; the merge base of it and the head is taken in the checkout), so a PR behind its
    base branch is never charged with what landed there since. ``ref``: a ref given by hand.
    ``default-branch``: the default branch's head (a manual run that names no base).
    """

    kind: BaseKind
    ref: str


@dataclass(frozen=True)
class Selection:
    """What to run: kernels, case globs and a profile, or one ad-hoc shape; this shard."""

    kernels: tuple[str, ...] = ()
    case_globs: tuple[str, ...] = ()
    profile: str | None = None  # None for an ad-hoc --shape case
    shard: Shard | None = None
    shape: tuple[int, ...] | None = None
    dtype: str = DTYPE

    @property
    def adhoc(self) -> bool:
        return self.shape is not None


@dataclass(frozen=True)
class BaselineSource:
    """Where baselines come from: the store folder, explicit files, a pinned version."""

    folder: Path
    files: tuple[Path, ...] = ()
    # Read the folder as it is at this commit (a PR's base), not from the working tree.
    ref: str | None = None
    # kernel -> version; "*" (a bare version) applies to every kernel that has that file.
    pins: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Outputs:
    """Where and how a command writes."""

    out_dir: Path  # where `ci` writes results, report, comment and summary
    output: Path | None  # a command's own results or report file
    fmt: str  # table, json or markdown on stdout
    quiet: bool


@dataclass(frozen=True)
class Inputs:
    """Files made elsewhere and handed in: another job's, or an earlier run's."""

    results: Path | None  # results to judge (the report job: the shards' folder)
    ab_report: Path | None  # an A/B report measured by another job (mode both)
    report_dir: Path | None  # the comment and relay roles: the downloaded artifact
    resume: Path | None  # a results file to grow


@dataclass(frozen=True)
class Workers:
    """The measuring processes (issue 13): how many (None: one per local accelerator) and
    one case's wall-clock limit before its worker is killed."""

    count: int | None
    case_timeout: float


@dataclass(frozen=True)
class CpuInterpret:
    """On CPU: the kernel's own interpreter or jax's TPU interpreter, per kernel (config
    cpu-interpret-tpu, SPECs' cpu_interpret) unless the flag forced one for all."""

    mode: str  # "kernel" or "tpu"
    forced: bool
    tpu_kernels: tuple[str, ...]


@dataclass(frozen=True)
class Publishing:
    """What a run may do outside its output folder."""

    publish: bool  # job summary, step outputs, annotations
    comment: bool  # the sticky pull-request comment
    promote_via: str  # a release's baselines: a commit or a pull request
