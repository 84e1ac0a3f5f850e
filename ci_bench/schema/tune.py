"""``ci-bench tune`` output and the tuned-configs file, versioned (docs/FORMATS.md).

``TuneReport``: every candidate of every case (``config``, ``lowers``, per chip ``fits``,
``modelled_us``, ``bound``; ``steps``, ``bytes``; ``why_not``), ranked per chip by the cost
model, and the measured confirmation (``--measure K``) where there was one.

``TunedFile``: ``<baselines>/<kernel>_v<version>.tuned.<chip>.json``, the winner per case
and its evidence; read at run time by ``ci_bench.spec.tuned_config`` (standard library
only), validated here by ``check-spec``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ci_bench.schema.base import CaseId, KernelName, Mode, Model, UtcDatetime, Version
from ci_bench.schema.model import Bound

TUNE_SCHEMA_VERSION = 2
# 2 (issue 39): candidates the model cannot tell apart share a rank; ``tied`` and
# ``tie_knobs`` say when the best is a set; ``notes`` (``--values`` adding the default's
# value). Version 1 is still read.
TUNE_READABLE = (1, 2)
# The model's resolution, relative: its inputs are exact integers (bytes, steps, FLOPs) and
# its time a sum of their quotients by per-chip constants, so two figures within 0.1 % of
# each other differ by float rounding or by a term far below what the model claims to get
# right or a timer can confirm: ``tune`` does not order candidates closer than this.
TIE_RESOLUTION = 1e-3
TUNED_SCHEMA_VERSION = 1
ConfigValue = int | str | bool
Config = dict[str, ConfigValue]


class CandidateChip(Model):
    """One candidate on one target chip."""

    fits: bool
    why_not: str | None = Field(None, description="the VMEM it needs and the chip's limit")
    modelled_us: float = Field(ge=0)
    bound: Bound
    bytes: int = Field(ge=0, description="modelled HBM bytes on this chip")
    rank: int | None = Field(None, ge=1, description="among candidates that lower and fit")
    lowers: bool | None = Field(
        None, description="jax.export for TPU as this chip; null: not tried, or a host error"
    )
    lowering_error: str | None = None


class Candidate(Model):
    """One point of the search space."""

    config: Config
    default: bool = Field(False, description="the subject's default config")
    why_not: str | None = Field(
        None, description="why it was dropped: a constraint, the config, tracing or the model"
    )
    lowers: bool | None = Field(
        None, description="lowers as every chip it fits; null: not tried, or a host error"
    )
    lowering_error: str | None = None
    host_error: bool = Field(
        False, description="tracing or lowering failed for this machine, not the kernel"
    )
    steps: int | None = Field(None, ge=0, description="grid steps of every pallas_call")
    bytes: int | None = Field(None, ge=0, description="modelled HBM bytes")
    vmem_bytes: int | None = Field(None, ge=0)
    flops: int | None = Field(None, ge=0)
    chips: dict[str, CandidateChip] = Field(default_factory=dict)
    same_as: int | None = Field(
        None, ge=0, description="index of an earlier candidate with the identical program"
    )


class Measured(Model):
    """``tune --measure``: one config timed interleaved with the default, in one process."""

    config: Config
    default: bool = False
    median_ms: float = Field(ge=0)
    samples: int = Field(ge=1)
    ratio: float | None = Field(None, description="median time / the default's (paired)")
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = Field(None, ge=0, le=1)
    device_kind: str


class Current(Model):
    """``tune --measure``: the kernel's own subject as it runs before this tune writes (its
    tuned entry for the case, else whatever the kernel falls back to), timed in the same
    rounds: ``--write`` keeps it when no candidate measured faster (issue 53: a backward
    entry tuned over a narrow space measured 11 % slower than the forward tiles it replaced)."""

    median_ms: float = Field(ge=0)
    samples: int = Field(ge=1)
    device_kind: str


class NotCompiled(Model):
    """``tune --measure``: a chosen config that did not compile on this chip (e.g. Mosaic's
    ``CompileTimeScopedVmemOom`` for a tiling the model counted as fitting); the next in
    the model's ranking is measured instead."""

    config: Config
    default: bool = False
    error: str = Field(description="the compiler's reason, one line")


class TunedCase(Model):
    """One case's search."""

    id: CaseId
    kernel: KernelName
    version: Version
    mode: Mode = "forward"
    params: dict[str, int]
    dtype: str
    space: int = Field(ge=0, description="candidates in the space")
    candidates: list[Candidate]
    best: dict[str, int] = Field(
        default_factory=dict,
        description="chip -> index of the model's best candidate (the default when it ties)",
    )
    tied: dict[str, list[int]] = Field(
        default_factory=dict,
        description="chip -> the candidates tied with the best (it first) when they are two "
        "or more distinct programs: the model's best is then this set (v2)",
    )
    tie_knobs: dict[str, list[str]] = Field(
        default_factory=dict, description="chip -> the knobs whose values differ in ``tied``"
    )
    default_index: int | None = Field(None, ge=0)
    measured: list[Measured] = Field(default_factory=list)
    not_compiled: list[NotCompiled] = Field(
        default_factory=list, description="--measure: chosen configs that did not compile"
    )
    current: Current | None = Field(
        None, description="--measure: the subject as it ran before this tune (v2, optional)"
    )
    notes: list[str] = Field(default_factory=list, description="what the search added (v2)")
    seconds: float = Field(ge=0)


class TuneMeta(Model):
    tool_version: str
    jax: str
    chips: list[str]
    seed: int
    seconds: float = Field(ge=0, description="wall time of the whole search")
    traced: int = Field(ge=0, description="candidates traced")
    reused: int = Field(0, ge=0, description="candidates whose program matched an earlier one")


class TuneReport(Model):
    """``ci-bench tune --format json``."""

    schema_version: Literal[1, 2] = TUNE_SCHEMA_VERSION
    kind: Literal["tune"] = "tune"
    meta: TuneMeta
    cases: list[TunedCase]


class TunedEntry(Model):
    """The winner of one case on the file's chip, and its evidence."""

    params: dict[str, int]
    dtype: str
    mode: Mode = "forward"
    config: Config
    default: Config
    modelled_us: float = Field(ge=0)
    default_modelled_us: float | None = Field(None, ge=0)
    measured: Measured | None = None
    default_measured: Measured | None = None
    candidates: int = Field(ge=1, description="candidates searched")


class TunedFile(Model):
    """``<kernel>_v<version>.tuned.<chip>.json``."""

    format: Literal["ci-bench-tuned"] = "ci-bench-tuned"
    schema_version: Literal[1] = TUNED_SCHEMA_VERSION
    kernel: KernelName
    version: Version
    chip: str = Field(pattern=r"^[a-z0-9]{1,16}$", description="jax's chip name: v5e, 7x")
    tool_version: str
    jax: str
    updated: UtcDatetime
    cases: dict[CaseId, TunedEntry]
