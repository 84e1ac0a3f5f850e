"""Golden-file tests: the markdown a reviewer reads is reviewed like code.

Regenerate after an intended change with ``UPDATE_GOLDEN=1 pytest tests/test_render.py``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ci_bench.judge.compare import compare
from ci_bench.report.comment import markdown_report
from ci_bench.report.terminal import terminal_report
from ci_bench.schema import FailPolicy, Thresholds
from ci_bench.store.baselines import BaselineFile, Lookup, entry_from_results
from tests.factories import case, results

GOLDEN = Path(__file__).parent / "golden"


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


@pytest.fixture
def report():
    ids = {
        "same": "matmul/B1-M128-K128-N128/float32",
        "slow": "matmul/B1-M1024-K1024-N1024/bfloat16",
        "fast": "matmul/B4-M128-K256-N128/float32",
        "noisy": "matmul/B1-M127-K513-N255/float32",
        "gone": "matmul/B1-M513-K513-N513/float32",
        "new": "matmul/B16-M128-K128-N128/bfloat16",
        "broken": "matmul/B1-M127-K513-N255/bfloat16",
    }
    base = results(
        [
            case(ids["same"], 1.0, peak_bytes=1_000_000),
            case(ids["slow"], 2.0, peak_bytes=4_000_000),
            case(ids["fast"], 3.0),
            case(ids["noisy"], 1.0, spread=0.9),
            case(ids["gone"], 5.0),
            case(ids["broken"], 1.0),
        ]
    )
    current = results(
        [
            case(ids["same"], 1.01, peak_bytes=1_500_000),
            case(ids["slow"], 2.5, peak_bytes=4_000_000),
            case(ids["fast"], 2.4),
            case(ids["noisy"], 1.08, spread=0.9),
            case(ids["new"], 0.5),
            case(ids["broken"], status="error"),
        ],
        commit="fedcba9876543210fedcba9876543210fedcba98",
    )
    entry = entry_from_results(base, "matmul", datetime(2026, 11, 2, tzinfo=UTC), "v0.1.0")
    doc = BaselineFile(kernel="matmul", version="0.1.0", entries=[entry])
    path = Path("baselines/matmul_v0.1.0.json")
    lookup = {
        "matmul": Lookup(
            "matmul", "0.2.0", path, doc, "compared with v0.1.0: no baseline yet for v0.2.0"
        )
    }
    return compare(current, lookup, Thresholds(), FailPolicy())


def test_markdown_report_matches_the_golden_file(report):
    golden("report.md", markdown_report(report))


def test_terminal_report_matches_the_golden_file(report):
    golden("report.txt", terminal_report(report))


def test_the_verdict_comes_first_and_regressions_lead_the_table(report):
    text = markdown_report(report)
    first = text.splitlines()[0]
    assert first.startswith("### ❌ ci-bench: 1 regression")
    look = text.split("#### Past a threshold")[1].split("<details>")[0]
    rows = [line for line in look.splitlines() if line.startswith("| `matmul/")]
    assert "regression" in rows[0]
    assert "memory +50%; ✅ pass" in rows[1]
    assert "| ✅ pass" not in look  # plain passes stay in the full matrix
    assert "compared with v0.1.0: no baseline yet for v0.2.0" in text
