"""The history record: one compact, versioned line per run, kept on the data branch.

A record keeps what a dashboard and change-point detection need (per-case summary
statistics, roofline figures, the verdict when known), not the raw samples: hundreds of
records must stay small enough for the contents API. Format history: docs/FORMATS.md.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

from pydantic import Field, model_validator

from ci_bench.schema.base import (
    CaseId,
    GitHubLogin,
    GitSha,
    KernelName,
    Model,
    UtcDatetime,
    Version,
)
from ci_bench.schema.results import Bound
from ci_bench.schema.verdicts import Verdict

HISTORY_SCHEMA_VERSION = 2
# Format 1 had no acceptance; it reads as a record without one.
HISTORY_READABLE = (1, 2)

Source = Literal["run", "promotion", "baseline"]


class CasePoint(Model):
    """One case of one run, reduced to summary statistics (milliseconds)."""

    id: CaseId
    kernel: str
    version: str
    dtype: str
    shape: list[int]
    status: Literal["ok", "error"]
    median_ms: float | None = None
    mean_ms: float | None = None
    min_ms: float | None = None
    q1_ms: float | None = Field(None, description="first quartile of the samples")
    q3_ms: float | None = Field(None, description="third quartile of the samples")
    repeats: int | None = Field(None, ge=0)
    tflops: float | None = None
    mfu: float | None = None
    hbm_utilization: float | None = None
    arithmetic_intensity: float | None = None
    bound: Bound | None = None
    peak_bytes: int | None = Field(None, ge=0)
    verdict: Verdict | None = Field(None, description="the pipeline's verdict, when known")

    @model_validator(mode="after")
    def _ok_has_timing(self) -> CasePoint:
        if self.status == "ok" and self.median_ms is None:
            raise ValueError(f"ok case {self.id} needs median_ms")
        return self


class DeviceRef(Model):
    """The device fingerprint's identity (comparability key) and what a reader shows."""

    identity: str
    platform: str
    device_kind: str
    software: str = Field(description="jax/jaxlib/libtpu versions")


class AcceptanceRecord(Model):
    """A maintainer's acceptance of the merged pull request's regressions: who, for which
    head, which cases (from the benchmark's own comment, never from pull-request code)."""

    label: str = Field(pattern=r"^[^\x00-\x1f\x7f]{1,50}$")
    by: GitHubLogin
    head_sha: GitSha
    cases: list[CaseId] = Field(default_factory=list)


class HistoryRecord(Model):
    """One run: a push to the default branch, a promotion, or a stored baseline entry."""

    schema_version: Literal[1, 2] = HISTORY_SCHEMA_VERSION
    # A commit sha, or a baseline's tag: printed and linked, so no spaces or control text.
    commit: str = Field(pattern=r"^[^\x00-\x20\x7f]{1,256}$")
    time: UtcDatetime = Field(description="when the run started (UTC)")
    source: Source
    ref: str | None = None
    tag: str | None = None
    pr: int | None = Field(None, ge=1, description="pull request the commit merged, if known")
    profile: str | None = None
    tool_version: str
    device: DeviceRef
    timer: str | None = Field(None, description="how samples were timed, when results say")
    peak_tflops: float | None = None
    peak_gbps: float | None = None
    kernels: dict[KernelName, Version] = Field(description="kernel name -> version")
    cases: list[CasePoint]
    acceptance: AcceptanceRecord | None = Field(
        None, description="the merged pull request's accepted regressions (format 2)"
    )

    @model_validator(mode="after")
    def _one_point_per_case(self) -> HistoryRecord:
        counts = Counter(p.id for p in self.cases)
        if len(counts) != len(self.cases):
            raise ValueError(f"case {next(i for i, n in counts.items() if n > 1)} twice")
        return self

    @property
    def key(self) -> tuple[str, str, str]:
        """Idempotency key: one record per commit, device and source."""
        return self.commit, self.device.identity, self.source
