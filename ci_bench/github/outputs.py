"""Job summary, step outputs and annotations: the files and commands Actions reads."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path

from ci_bench.report.escape import workflow_data, workflow_property
from ci_bench.schema import STATE, Report


def append_summary(path: Path, markdown: str) -> None:
    """GITHUB_STEP_SUMMARY is appended to, so several steps can each add a section."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(markdown.rstrip("\n") + "\n\n")


def write_outputs(path: Path, values: Mapping[str, str]) -> None:
    """GITHUB_OUTPUT entries in the multi-line form, with a delimiter no value contains."""
    with path.open("a", encoding="utf-8") as handle:
        for name, value in values.items():
            delimiter = f"ghadelimiter_{uuid.uuid4()}"
            handle.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")


def annotations(report: Report) -> list[str]:
    """One annotation per case whose state has an annotation level in the verdict table."""
    lines = []
    for case in report.cases:
        level = STATE[case.verdict].annotation
        if level:
            title = workflow_property(f"ci-bench {case.verdict}: {case.id}")
            lines.append(f"::{level} title={title}::{workflow_data(case.id + ': ' + case.reason)}")
        if case.memory_verdict == "regression" and case.memory_change is not None:
            title = workflow_property(f"ci-bench memory regression: {case.id}")
            text = f"{case.id}: peak memory {case.memory_change:+.1%}"
            lines.append(f"::error title={title}::{workflow_data(text)}")
    for run in report.run_states:
        level = STATE[run.state].annotation
        if level:
            title = workflow_property(f"ci-bench {run.state}")
            lines.append(f"::{level} title={title}::{workflow_data('run: ' + run.reason)}")
    return lines


def report_outputs(report: Report, report_path: Path) -> dict[str, str]:
    return {
        "verdict": report.verdict,
        "regressions": str(
            report.counts.get("regression", 0) + report.counts.get("memory-regression", 0)
        ),
        "report-path": str(report_path),
    }
