"""The report (``ci-bench compare``/``ab``/``ci``): verdicts per case, versioned."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ci_bench.schema.base import (
    KEBAB,
    CaseId,
    GitHubLogin,
    GitSha,
    HttpUrl,
    KernelName,
    Model,
    Version,
)
from ci_bench.schema.baseline import Provenance
from ci_bench.schema.results import CaseResult, DeviceFingerprint, RunMeta
from ci_bench.schema.unit_metrics import KernelUnitMetrics
from ci_bench.schema.verdicts import CaseState, FailPolicy, RunStateName, Verdict


class Thresholds(Model):
    """Specification section 4.2: mean_ms more than 5 % above, tflops below 95 %."""

    model_config = KEBAB

    mean_slowdown: float = Field(0.05, gt=0, lt=10)
    tflops_drop: float = Field(0.05, gt=0, lt=1)
    significance: float = Field(0.01, gt=0, lt=1, description="Mann-Whitney U level")
    memory_growth: float = Field(0.10, gt=0)
    # The cost model is exact, so the specification's 5 % needs no significance test.
    model_slowdown: float = Field(
        0.05, gt=0, lt=10, description="modelled TPU time growth that is a structural change"
    )


REPORT_SCHEMA_VERSION = 9
# 3 adds run-level states and the acceptance; 4 the cost model's verdict per case; 5 cases
# (current and baseline CaseResults) that record their mode and implementations; 7 each
# kernel's source files on both sides of an A/B (``sources``) and the ``inherited`` and
# ``same-code`` states; 8 the unit metrics of a slower case's two sides (``unit_metrics``);
# 9 a kernel's baseline provenance may say it was measured ``dirty`` (baseline format 7).
# Older versions read as none of these.
REPORT_READABLE = (2, 3, 4, 5, 6, 7, 8, 9)
# Peak memory is a compile-time figure, deterministic: no significance test needed.
MemoryVerdict = Literal["pass", "regression", "improved", "accepted"]
# The cost model is exact too: modelled time past the threshold on a target chip is
# ``structural`` (the verdict table's state), a fall past it ``improved``.
ModelVerdict = Literal["pass", "structural", "improved", "accepted"]


class ChipChange(Model):
    """One target chip's modelled time, reference against current."""

    base_us: float
    head_us: float
    change: float = Field(description="head / base - 1")
    fits: bool = True


class ModelChange(Model):
    """The cost model of a case against its reference (baseline, or the A/B base)."""

    verdict: ModelVerdict
    reason: str
    chip: str | None = Field(None, description="the target chip whose time moved most")
    time_change: float | None = Field(None, description="that chip's modelled time change")
    hbm_bytes: int = Field(0, description="current - reference modelled HBM bytes")
    grid_steps: int = Field(0, description="current - reference grid steps")
    vmem_bytes: int = Field(0, description="current - reference peak VMEM bytes")
    hbm_ratio: float | None = Field(None, description="current / reference HBM bytes")
    steps_ratio: float | None = Field(None, description="current / reference grid steps")
    chips: dict[str, ChipChange] = Field(default_factory=dict)


class UnitMetricsPair(Model):
    """The specification's section 3.3 metrics of a case's Pallas kernels on both sides of
    an A/B, from a pass apart from the timed one (version 8; config ``unit-metrics``)."""

    head: list[KernelUnitMetrics] = Field(default_factory=list)
    base: list[KernelUnitMetrics] = Field(default_factory=list)
    note: str | None = Field(None, description="why a side has none (no TPU, a failure)")


class CaseVerdict(Model):
    """One case compared with its baseline."""

    id: CaseId
    kernel: KernelName
    verdict: CaseState
    reason: str
    current: CaseResult | None = None
    baseline: CaseResult | None = None
    mean_change: float | None = Field(None, description="current/baseline mean_ms - 1")
    tflops_ratio: float | None = Field(None, description="current/baseline tflops")
    p_value: float | None = Field(None, description="one-sided Mann-Whitney U")
    memory_change: float | None = Field(None, description="current/baseline peak bytes - 1")
    memory_verdict: MemoryVerdict | None = None
    mdc: float | None = Field(
        None, description="minimum detectable relative change of this comparison (80 % power)"
    )
    min_repeats: int | None = Field(
        None,
        description="repeats this comparison needs before any change can be significant at "
        "this matrix size; null when it has enough",
    )
    confirmed: bool | None = Field(
        None, description="a flagged change re-measured: true if it held, null if not re-measured"
    )
    ratio: float | None = Field(None, description="A/B: median of paired head/base ratios")
    ratio_low: float | None = Field(None, description="A/B: bootstrap 95 % interval, low")
    ratio_high: float | None = Field(None, description="A/B: bootstrap 95 % interval, high")
    model: ModelChange | None = Field(
        None, description="the cost model's exact verdict beside the timing one (version 3)"
    )
    unit_metrics: UnitMetricsPair | None = Field(
        None, description="A/B, a slower case: each side's unit metrics (version 8)"
    )


class SourceFile(Model):
    """A file a side's implementation was traced from (version 7)."""

    path: str = Field(
        max_length=1000,
        description="relative to that side's checkout, or absolute when outside it",
    )
    inside: bool = Field(description="inside that side's checkout of the repository")
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    kernel: bool = Field(False, description="a Pallas kernel's body or call comes from it")


class KernelSources(Model):
    """What an A/B's two sides ran for one kernel: the files their traces came from, and
    which of the head's this pull request changed (version 7)."""

    head: list[SourceFile] = Field(default_factory=list)
    base: list[SourceFile] = Field(default_factory=list)
    changed: list[str] = Field(
        default_factory=list, description="the head's files this pull request changed"
    )
    error: str | None = Field(None, description="why a side's files are not known")


class KernelSummary(Model):
    """Which baseline a kernel was compared with, and anything a reader must know."""

    kernel: KernelName
    version: Version
    baseline_version: str | None = None
    baseline_path: str | None = None
    note: str | None = None
    provenance: Provenance | None = None
    baseline_device: DeviceFingerprint | None = None
    warnings: list[str] = Field(default_factory=list)
    sources: KernelSources | None = Field(None, description="A/B: each side's files (version 7)")


class RunState(Model):
    """A fact about the whole run that the verdict table judges like a case state."""

    state: RunStateName
    reason: str


class Acceptance(Model):
    """A maintainer's accept label on the pull request's head: confirmed regressions of that
    commit become ``accepted``. Tied to the commit: a new push needs the label again."""

    # Rendered into the PR comment ("accepted by @by") from the artifact: a GitHub login, a
    # commit, a label as GitHub allows them (50 characters), never markup or a second mention.
    label: str = Field(pattern=r"^[^\x00-\x1f\x7f]{1,50}$")
    by: GitHubLogin = Field(description="the account that applied the label")
    head_sha: GitSha = Field(description="the commit it was applied for")


class Report(Model):
    """``ci-bench compare`` output: the verdict and everything needed to render it."""

    schema_version: Literal[2, 3, 4, 5, 6, 7, 8, 9] = REPORT_SCHEMA_VERSION
    mode: Literal["baseline", "ab", "pr"] = Field(
        "baseline",
        description="stored baseline, head and base measured in one process (ab), or a pull "
        "request's verdict from both (pr: A/B decides, the baseline diff shows drift)",
    )
    base_ref: str | None = Field(None, description="A/B: the base git ref and commit")
    verdict: Verdict
    exit_code: int
    headline: str
    counts: dict[str, int]
    thresholds: Thresholds
    policy: FailPolicy
    meta: RunMeta
    kernels: list[KernelSummary]
    cases: list[CaseVerdict]
    run_states: list[RunState] = Field(
        default_factory=list,
        description="run-level states (a lost A/B, an unfinished file), judged with the cases",
    )
    acceptance: Acceptance | None = Field(
        None, description="the accept label that turned confirmed regressions into 'accepted'"
    )
    # Rendered into the PR comment's footer from an artifact pull-request code wrote: a
    # commit is hex, a run link a plain http(s) URL, or the report is refused.
    head_sha: GitSha | None = Field(None, description="the pull request's head commit")
    run_url: HttpUrl | None = Field(None, description="the workflow run that measured it")

    @model_validator(mode="after")
    def _one_verdict_per_case(self) -> Report:
        """A case judged twice cannot say which verdict stands (``record`` keeps one per
        case): refused, as results files refuse a repeated case id."""
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                raise ValueError(f"case {case.id} is judged twice")
            seen.add(case.id)
        return self
