"""Baseline files (``baselines/<kernel>_v<version>.json``): one entry per device, versioned."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from ci_bench.schema.base import KernelName, Model, UtcDatetime, Version
from ci_bench.schema.results import CaseResult, DeviceFingerprint, RunSettings
from ci_bench.text import SEMVER


class Remodelled(Model):
    """When an entry's cost models were computed again (``ci-bench remodel``) after it was
    measured: its times are the measurement's, its models this revision's of this commit."""

    commit: str = Field(description="the commit whose kernel code was modelled")
    revision: int = Field(ge=1, description="the cost model's revision that modelled it")
    remodelled_at: UtcDatetime
    tool_version: str


class Provenance(Model):
    """Where a baseline entry came from: enough to reproduce or distrust it."""

    tag: str | None = None
    commit: str | None = None
    ref: str | None = None
    promoted_at: UtcDatetime
    measured_at: UtcDatetime
    tool_version: str
    profile: str | None
    remodelled: Remodelled | None = None
    dirty: bool | None = Field(
        default=None,
        description="the checkout measured had uncommitted changes to tracked files, so "
        "`commit` is where they began, not the code measured (null: not recorded)",
    )


BASELINE_SCHEMA_VERSION = 7
# Versions this ci-bench reads: entries embed results models, so they follow results
# 1 -> 2 -> 3 -> 4 (3: each case may carry its cost ``model``; 4: cases record their mode
# and implementations); 6: an entry's provenance may say it was ``remodelled``; 7: and
# whether the checkout measured was ``dirty``.
BASELINE_READABLE = (1, 2, 3, 4, 5, 6, 7)


class BaselineEntry(Model):
    """One device's numbers for one kernel version."""

    device: DeviceFingerprint
    provenance: Provenance
    settings: RunSettings
    cases: list[CaseResult]

    @model_validator(mode="after")
    def _only_ok_cases(self) -> BaselineEntry:
        bad = [c.id for c in self.cases if c.status != "ok"]
        if bad:
            raise ValueError(f"a baseline holds only ok cases, not {', '.join(bad[:3])}")
        counts = Counter(c.id for c in self.cases)
        if len(counts) != len(self.cases):
            raise ValueError(f"case {next(i for i, n in counts.items() if n > 1)} twice")
        return self


class BaselineFile(Model):
    schema_version: Literal[1, 2, 3, 4, 5, 6, 7] = BASELINE_SCHEMA_VERSION
    kernel: KernelName
    version: Version
    entries: list[BaselineEntry]

    @model_validator(mode="after")
    def _consistent(self) -> BaselineFile:
        identities = [e.device.identity for e in self.entries]
        if len(identities) != len(set(identities)):
            raise ValueError("two entries for the same device")
        for entry in self.entries:
            for case in entry.cases:
                if case.kernel != self.kernel or case.version != self.version:
                    raise ValueError(
                        f"case {case.id} is {case.kernel} v{case.version}, "
                        f"not {self.kernel} v{self.version}"
                    )
        return self

    def entry_for(self, device: DeviceFingerprint) -> BaselineEntry | None:
        return next((e for e in self.entries if e.device.identity == device.identity), None)


def version_key(version: str) -> tuple[int, int, int, int, str]:
    """Semver order: a pre-release sorts before its release."""
    match = SEMVER.fullmatch(version)
    if not match:
        raise ValueError(f"not a semver version: {version!r}")
    pre = version.partition("-")[2]
    return int(match[1]), int(match[2]), int(match[3]), 0 if pre else 1, pre


# The key of a baseline pin that names no kernel (``--baseline-version 0.1.0``): it applies
# to every kernel that has a baseline at that version.
ANY_KERNEL = "*"


@dataclass(frozen=True)
class Lookup:
    """The baseline chosen for a kernel version, and why (shown in the report)."""

    kernel: str
    version: str
    path: Path | None
    baseline: BaselineFile | None
    note: str | None
