"""Versioned pydantic models: results, baselines and reports are public contracts.

Pure data with validation, and the verdict table. Imports nothing of ci_bench (``errors``
aside). Format history: docs/FORMATS.md.
"""

from ci_bench.schema.base import KEBAB, Model
from ci_bench.schema.baseline import (
    BASELINE_SCHEMA_VERSION,
    BaselineEntry,
    BaselineFile,
    Lookup,
    Provenance,
    version_key,
)
from ci_bench.schema.report import (
    REPORT_SCHEMA_VERSION,
    CaseVerdict,
    KernelSummary,
    MemoryVerdict,
    Report,
    Thresholds,
)
from ci_bench.schema.results import (
    RESULTS_SCHEMA_VERSION,
    Bound,
    CaseResult,
    CaseStatus,
    CompiledStats,
    CompileTimes,
    Correctness,
    CostCheckStatus,
    CostModelCheck,
    DeviceFingerprint,
    GitInfo,
    MemoryStats,
    Metrics,
    Results,
    RunMeta,
    RunSettings,
    TimingStats,
    XlaCost,
)
from ci_bench.schema.verdicts import (
    STATE,
    VERDICT_PRECEDENCE,
    VERDICTS,
    FailPolicy,
    Verdict,
    VerdictState,
)

__all__ = [
    "BASELINE_SCHEMA_VERSION",
    "KEBAB",
    "REPORT_SCHEMA_VERSION",
    "RESULTS_SCHEMA_VERSION",
    "STATE",
    "VERDICTS",
    "VERDICT_PRECEDENCE",
    "BaselineEntry",
    "BaselineFile",
    "Bound",
    "CaseResult",
    "CaseStatus",
    "CaseVerdict",
    "CompileTimes",
    "CompiledStats",
    "Correctness",
    "CostCheckStatus",
    "CostModelCheck",
    "DeviceFingerprint",
    "FailPolicy",
    "GitInfo",
    "KernelSummary",
    "Lookup",
    "MemoryStats",
    "MemoryVerdict",
    "Metrics",
    "Model",
    "Provenance",
    "Report",
    "Results",
    "RunMeta",
    "RunSettings",
    "Thresholds",
    "TimingStats",
    "Verdict",
    "VerdictState",
    "XlaCost",
    "version_key",
]
