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
from ci_bench.report.render import results_table
from ci_bench.report.terminal import terminal_report
from ci_bench.schema import FailPolicy, Thresholds
from ci_bench.store.baselines import BaselineFile, Lookup, entry_from_results
from tests.harness.factories import case, results

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


LONG = "flash_attention/B16-H32-T8192-D128-W4096/bfloat16"


def test_the_run_table_fits_120_columns_and_names_what_it_left_out():
    cases = [case(LONG, 1.5), case("matmul/B1-M128-K128-N128/float32", 0.2)]
    text = results_table(cases, interpreted=True)
    assert max(len(line) for line in text.splitlines()) <= 120
    assert text.splitlines()[0].startswith("† CPU interpreter — times are not kernel performance")
    header = next(line for line in text.splitlines() if line.startswith("case"))
    assert "speedup†" in header
    assert "TFLOPS†" in header
    assert "compile ms" not in header
    assert "(left out to fit 120 columns: compile ms" in text
    wide = results_table(cases, interpreted=True, width=None)
    wide_header = next(line for line in wide.splitlines() if line.startswith("case"))
    assert wide_header.split() == [
        "case", "mode", "Pallas", "ms†", "native", "ms", "speedup†", "TFLOPS†", "GB/s†",
        "MFU/HBM†", "compile", "ms",
    ]  # fmt: skip
    assert "left out" not in wide
    on_tpu = results_table(cases, interpreted=False)
    assert "†" not in on_tpu
    assert "interpreter" not in on_tpu


def test_the_verdict_table_fits_120_columns_unless_wide(report):
    text = terminal_report(report)
    assert max(len(line) for line in text.splitlines()) <= 120
    assert "left out to fit 120 columns" in text
    wide = terminal_report(report, wide=True)
    header = next(line for line in wide.splitlines() if line.startswith("case"))
    for column in ("native ms", "GB/s†", "bound", "baseline ms", "mem Δ", "MDC", "verdict"):
        assert column in header
    assert "A/B Δ" not in header  # a baseline report has no A/B


def test_a_pr_report_in_a_terminal_keeps_the_two_comparisons_apart():
    from tests.harness.comment_data import BASE, REG, rich_pr_report

    text = terminal_report(rich_pr_report(), wide=True)
    row = next(line for line in text.splitlines() if line.startswith(f"{REG} "))
    assert "+25.2%" in row  # against the baseline
    assert "+24.7% [+22.2%, +27.8%]" in row  # the A/B, with its interval
    assert "regression (confirmed)" in row
    assert f"A/B: head against main ({BASE[:12]})" in text
