"""Job summary, step outputs and annotations: the files and commands Actions reads.

The three are independent: a ``GITHUB_STEP_SUMMARY`` that cannot be written (a folder, a
path whose folder is missing) must not cost the step outputs or the annotations, which the
workflow's next steps and the checks page read (``pipeline.publish.publish_locally`` tries
each, then reports what failed in one line).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path

from ci_bench.report.escape import workflow_data, workflow_property
from ci_bench.schema import STATE, Report
from ci_bench.store.files import append_text


def append_summary(path: Path, markdown: str) -> None:
    """GITHUB_STEP_SUMMARY is appended to, so several steps can each add a section."""
    append_text(path, markdown.rstrip("\n") + "\n\n", what="job summary (GITHUB_STEP_SUMMARY)")


def write_outputs(path: Path, values: Mapping[str, str]) -> None:
    """GITHUB_OUTPUT entries in the multi-line form, with a delimiter no value contains."""
    text = ""
    for name, value in values.items():
        delimiter = f"ghadelimiter_{uuid.uuid4()}"
        text += f"{name}<<{delimiter}\n{value}\n{delimiter}\n"
    append_text(path, text, what="step outputs (GITHUB_OUTPUT)")


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
