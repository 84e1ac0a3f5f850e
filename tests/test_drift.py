"""``drift`` is a warning only when it is established like a regression (issue 24): past the
threshold and significant against the baseline, confirmed by the A/B job's own measurement
of the head, outside the A/B's interval, and beyond twice what the head's two runs disagree
by (this case's or the matrix's typical). Anything less is information in the row."""

from __future__ import annotations

import pytest

from ci_bench.errors import ExitCode
from ci_bench.judge.ab import ab_report
from ci_bench.judge.compare import compare
from ci_bench.judge.pr import pr_report
from ci_bench.judge.stats import stats_of
from ci_bench.schema import FailPolicy, Thresholds
from tests.harness.factories import case, results
from tests.test_compare import A, B, baseline_of, lookup

T = Thresholds()
C = "matmul/B4-M128-K256-N128/float32"


def pr_of(stored_ms, shard_ms, head_ms, base_ms, *, spread: float = 0.01):
    """The PR verdict from a stored baseline, the shards' measurement of the head and the
    A/B job's paired head and base measurements (deterministic samples)."""
    stored = baseline_of(results([case(cid, ms) for cid, ms in stored_ms.items()]))
    shard = results([case(cid, ms, spread=spread) for cid, ms in shard_ms.items()])
    baseline = compare(shard, lookup(stored), T, FailPolicy())
    head = results([case(cid, ms, spread=spread) for cid, ms in head_ms.items()])
    bases = [case(cid, ms, spread=spread) for cid, ms in base_ms.items()]
    ab = ab_report(head, bases, "main (abc)", T, FailPolicy())
    return baseline, pr_report(baseline, ab, FailPolicy())


def test_an_excess_the_second_measurement_does_not_repeat_is_information_not_drift():
    # The shard ran while the machine was busy (+30 %); the A/B job measured the same head
    # at the baseline's level: nothing moved for long.
    baseline, pr = pr_of({A: 1.0}, {A: 1.3}, {A: 1.0}, {A: 1.0})
    assert baseline.cases[0].verdict == "regression"
    (row,) = pr.cases
    assert row.verdict == "pass"
    assert "against the baseline: +30.0% mean" in row.reason
    assert row.mean_change == pytest.approx(0.3)  # the baseline figure stays in the row
    assert pr.counts.get("drift", 0) == 0
    assert pr.exit_code == ExitCode.OK


def test_a_confirmed_slowdown_outside_the_ab_interval_is_drift_a_speedup_information():
    _, slower = pr_of({A: 1.0, B: 1.0}, {A: 1.3, B: 1.0}, {A: 1.3, B: 1.0}, {A: 1.3, B: 1.0})
    rows = {v.id: v for v in slower.cases}
    assert rows[A].verdict == "drift"
    assert "confirmed by the A/B job's own measurement of the head (+30.0%" in rows[A].reason
    assert rows[B].verdict == "pass"
    # Faster than the baseline, established the same way: good news, not a warning; the
    # baseline's figure stays in the row (the comment counts it in one collapsed line).
    _, faster = pr_of({A: 1.0}, {A: 0.7}, {A: 0.7}, {A: 0.7})
    (row,) = faster.cases
    assert row.verdict == "pass"
    assert row.mean_change == pytest.approx(-0.3)
    assert "against the baseline: -30.0% mean" in row.reason


def test_a_baseline_noisy_case_the_ab_clears_passes_and_the_p_value_is_the_abs():
    # Before issue 24 the baseline's "noisy" stood beside an A/B that saw nothing.
    _, pr = pr_of({A: 1.0}, {A: 1.08}, {A: 1.0}, {A: 1.0}, spread=0.9)
    (row,) = pr.cases
    assert row.verdict == "pass"
    assert row.reason.startswith("A/B against the base: ")
    assert row.p_value is None  # the A/B's: within its thresholds, no test needed


def test_an_ab_that_cannot_rule_out_the_pr_keeps_the_row_noisy_with_its_own_p():
    stored = baseline_of(results([case(A, 1.0)]))
    baseline = compare(results([case(A, 1.3)]), lookup(stored), T, FailPolicy())
    base = case(A, 1.3)
    # Paired ratios all over the place (0.8x to 1.45x): +10 % [-5 %, +30 %], not significant.
    pattern = [0.8, 1.45, 0.95, 1.3, 1.1]
    samples = [ms / 1e3 * pattern[i % 5] for i, ms in enumerate(base.pallas.samples_ms)]
    head = base.model_copy(update={"pallas": stats_of(samples, warmup=5)})
    ab = ab_report(results([head]), [base], "main (abc)", T, FailPolicy())
    assert ab.cases[0].verdict == "noisy"
    (row,) = pr_report(baseline, ab, FailPolicy()).cases
    assert row.verdict == "noisy"
    assert row.p_value == ab.cases[0].p_value != baseline.cases[0].p_value
    assert row.reason.startswith("A/B against the base: ratio 1.100")
    assert "; against the baseline: +30.0% mean" in row.reason


def test_an_excess_within_twice_the_heads_run_to_run_difference_is_information():
    # Both runs of the head are well above the baseline (+30 %, +12 %: each significant),
    # but they differ by 16 %: one stored run can be off by as much. Not drift.
    _, pr = pr_of({A: 1.0}, {A: 1.3}, {A: 1.12}, {A: 1.12})
    (row,) = pr.cases
    assert row.verdict == "pass"
    assert "against the baseline: +30.0% mean" in row.reason
    # The same excess with two runs of the head that agree (+30 %, +24 %) is drift.
    _, pr = pr_of({A: 1.0}, {A: 1.3}, {A: 1.24}, {A: 1.24})
    assert pr.cases[0].verdict == "drift"
    assert "the two runs of the head differ by 4.8%" in pr.cases[0].reason


def test_when_the_matrixs_runs_disagree_one_cases_agreeing_runs_are_not_enough():
    # A's two runs agree, but across the matrix separate runs of the same code differ by
    # 20 % (B, C): A's +30 % against one stored run is within twice that.
    _, pr = pr_of(
        {A: 1.0, B: 1.0, C: 1.0}, {A: 1.3, B: 1.2, C: 1.2}, {A: 1.3, B: 1.0, C: 1.0},
        {A: 1.3, B: 1.0, C: 1.0},
    )  # fmt: skip
    rows = {v.id: v.verdict for v in pr.cases}
    assert rows == {A: "pass", B: "pass", C: "pass"}
    assert pr.counts.get("drift", 0) == 0
