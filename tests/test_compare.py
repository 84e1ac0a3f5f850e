from __future__ import annotations

from pathlib import Path

import pytest

from ci_bench.errors import ExitCode
from ci_bench.judge.compare import compare, judge
from ci_bench.schema import FailPolicy, Thresholds
from ci_bench.store.baselines import BaselineFile, Lookup, entry_from_results
from tests.harness.factories import CPU, V5E, case, results

A = "matmul/B1-M128-K128-N128/float32"
B = "matmul/B1-M127-K513-N255/bfloat16"
T = Thresholds()


def baseline_of(res, tag="v0.1.0") -> BaselineFile:
    from datetime import UTC, datetime

    entry = entry_from_results(res, "matmul", datetime(2026, 11, 2, tzinfo=UTC), tag)
    return BaselineFile(kernel="matmul", version="0.1.0", entries=[entry])


def lookup(baseline: BaselineFile | None, note: str | None = None) -> dict[str, Lookup]:
    path = Path("baselines/matmul_v0.1.0.json") if baseline else None
    return {"matmul": Lookup("matmul", "0.1.0", path, baseline, note)}


def test_identical_results_pass():
    run = results([case(A), case(B)])
    report = compare(run, lookup(baseline_of(run)), T, FailPolicy())
    assert [c.verdict for c in report.cases] == ["pass", "pass"]
    assert report.verdict == "pass"
    assert report.exit_code == ExitCode.OK
    assert report.cases[0].mean_change == pytest.approx(0.0)


def test_significantly_slower_is_a_regression():
    report = compare(
        results([case(A, 1.25), case(B)]),
        lookup(baseline_of(results([case(A, 1.0), case(B)]))),
        T,
        FailPolicy(),
    )
    verdicts = {c.id: c for c in report.cases}
    assert verdicts[A].verdict == "regression"
    assert verdicts[A].mean_change == pytest.approx(0.25)
    assert verdicts[A].tflops_ratio == pytest.approx(0.8)
    assert verdicts[A].p_value < 1e-6
    assert verdicts[B].verdict == "pass"
    assert report.verdict == "regression"
    assert report.exit_code == ExitCode.FAILED


def test_past_the_threshold_but_not_significant_is_noisy():
    base = results([case(A, 1.0, spread=0.9)])
    current = results([case(A, 1.08, spread=0.9)])
    verdict = compare(current, lookup(baseline_of(base)), T, FailPolicy()).cases[0]
    assert verdict.verdict == "noisy"
    assert verdict.p_value >= T.significance
    assert "not significant" in verdict.reason


def test_noisy_fails_only_under_the_policy():
    base = results([case(A, 1.0, spread=0.9)])
    current = results([case(A, 1.08, spread=0.9)])
    strict = compare(current, lookup(baseline_of(base)), T, FailPolicy(noisy=True))
    assert strict.exit_code == ExitCode.FAILED
    assert compare(current, lookup(baseline_of(base)), T, FailPolicy()).exit_code == 0


def test_significantly_faster_is_improved():
    verdict = judge(case(A, 0.7), case(A, 1.0), T)
    assert verdict.verdict == "improved"
    assert verdict.mean_change == pytest.approx(-0.3)


def test_the_tflops_rule_alone_can_flag_a_slowdown():
    # mean +5.1 %: under a 6 % mean threshold, but TFLOPS at 95.1 % is below a 96 % floor
    verdict = judge(case(A, 1.051), case(A, 1.0), Thresholds(mean_slowdown=0.06, tflops_drop=0.04))
    assert verdict.verdict == "regression"


def test_thresholds_are_configurable():
    loose = Thresholds(mean_slowdown=0.5, tflops_drop=0.5)
    assert judge(case(A, 1.25), case(A, 1.0), loose).verdict == "pass"


def test_errors_fail_by_policy_and_all_errors_mean_nothing_measured():
    base = baseline_of(results([case(A), case(B)]))
    mixed = results([case(A, status="error"), case(B)])
    report = compare(mixed, lookup(base), T, FailPolicy())
    assert report.cases[0].verdict == "error"
    assert report.verdict == "error"
    assert report.exit_code == ExitCode.FAILED
    assert compare(mixed, lookup(base), T, FailPolicy(error=False)).exit_code == ExitCode.OK
    broken = results([case(A, status="error"), case(B, status="error")])
    assert compare(broken, lookup(base), T, FailPolicy()).exit_code == ExitCode.NOTHING_MEASURED


def test_new_cases_and_missing_cases():
    base = baseline_of(results([case(A), case(B)]))
    run = results([case(A), case("matmul/B4-M128-K256-N128/float32")])
    report = compare(run, lookup(base), T, FailPolicy())
    verdicts = {c.id: c.verdict for c in report.cases}
    assert verdicts == {A: "pass", "matmul/B4-M128-K256-N128/float32": "new", B: "missing"}
    assert report.exit_code == ExitCode.OK
    assert compare(run, lookup(base), T, FailPolicy(missing=True)).exit_code == ExitCode.FAILED


def test_a_subset_or_another_profile_reports_no_missing_cases():
    base = baseline_of(results([case(A), case(B)], profile="full"))
    report = compare(results([case(A)], profile="ci"), lookup(base), T, FailPolicy())
    assert [c.verdict for c in report.cases] == ["pass"]


def test_no_baseline_file_makes_every_case_new():
    report = compare(results([case(A)]), lookup(None, "no baseline"), T, FailPolicy())
    assert report.cases[0].verdict == "new"
    assert report.exit_code == ExitCode.OK
    assert report.kernels[0].note == "no baseline"


def test_another_device_is_incomparable_never_a_regression():
    base = baseline_of(results([case(A, 0.1)], device=V5E))
    report = compare(results([case(A, 10.0)], device=CPU), lookup(base), T, FailPolicy())
    assert report.cases[0].verdict == "incomparable"
    assert "TPU v5 lite" in report.cases[0].reason
    assert report.exit_code == ExitCode.OK


def test_a_jax_version_difference_is_a_warning():
    old = CPU.model_copy(update={"jax": "0.9.0", "jaxlib": "0.9.0"})
    base = baseline_of(results([case(A)], device=old))
    report = compare(results([case(A)]), lookup(base), T, FailPolicy())
    assert report.cases[0].verdict == "pass"
    assert "jax 0.9.0" in report.kernels[0].warnings[0]


def test_peak_memory_growth_is_a_memory_regression_counted_in_the_verdict():
    base = baseline_of(results([case(A, 1.0, peak_bytes=1000), case(B, 1.0, peak_bytes=1000)]))
    run = results([case(A, 1.0, peak_bytes=1111), case(B, 1.0, peak_bytes=1050)])
    report = compare(run, lookup(base), T, FailPolicy())
    verdicts = {c.id: c for c in report.cases}
    assert verdicts[A].verdict == "pass"  # time is fine
    assert verdicts[A].memory_verdict == "regression"
    assert verdicts[A].memory_change == pytest.approx(0.111)
    assert verdicts[B].memory_verdict == "pass"
    assert report.verdict == "regression"
    assert report.exit_code == ExitCode.FAILED
    assert report.headline.startswith("regression: 1 memory regression")
    looser = compare(run, lookup(base), Thresholds(memory_growth=0.2), FailPolicy())
    assert looser.exit_code == ExitCode.OK


def test_a_wrong_flops_model_is_a_warning_in_the_report():
    from ci_bench.measure.harness import cost_model_check
    from ci_bench.schema import CompiledStats, XlaCost

    native = CompiledStats(cost=XlaCost(flops=1000.0, bytes_accessed=10.0, has_loops=False))
    check = cost_model_check(4000, native, 2.0)
    assert check.status == "mismatch"
    assert check.ratio == pytest.approx(4.0)
    assert cost_model_check(1500, native, 2.0).status == "ok"
    looping = CompiledStats(cost=XlaCost(flops=1000.0, bytes_accessed=10.0, has_loops=True))
    assert cost_model_check(4000, looping, 2.0).status == "unverifiable"
    wrong = case(A).model_copy(update={"cost_check": check})
    report = compare(results([wrong]), lookup(None), T, FailPolicy())
    assert "FLOPs model disagrees with XLA in 1 case(s)" in report.kernels[0].warnings[0]


def test_the_false_discovery_rate_is_controlled_across_the_matrix():
    # One case with p ≈ 0.0025 is a regression on its own (p < 0.01); among 20 cases where
    # 18 did not move, Benjamini-Hochberg asks for p ≤ 0.001 at its rank and calls it noisy.
    # The strong regression (p ≈ 3e-8) survives.
    ids = [f"matmul/B{i}-M128-K128-N128/float32" for i in range(1, 21)]
    strong, weak, nulls = ids[0], ids[1], ids[2:]
    base = results([case(strong), case(weak, spread=0.2)] + [case(i) for i in nulls])
    current = results([case(strong, 1.5), case(weak, 1.15, spread=0.2)] + [case(i) for i in nulls])
    alone = judge(current.cases[1], base.cases[1], T)
    assert alone.verdict == "regression"
    assert 0.001 < alone.p_value < 0.01
    report = compare(current, lookup(baseline_of(base)), T, FailPolicy())
    verdicts = {c.id: c for c in report.cases}
    assert verdicts[strong].verdict == "regression"
    assert verdicts[weak].verdict == "noisy"
    assert "false-discovery rate" in verdicts[weak].reason
    assert all(verdicts[i].verdict == "pass" for i in nulls)


def test_every_comparison_reports_its_minimum_detectable_change():
    quiet = compare(
        results([case(A, 1.0, spread=0.01)]),
        lookup(baseline_of(results([case(A, 1.0, spread=0.01)]))),
        T,
        FailPolicy(),
    )
    noisy = compare(
        results([case(A, 1.0, spread=0.5)]),
        lookup(baseline_of(results([case(A, 1.0, spread=0.5)]))),
        T,
        FailPolicy(),
    )
    assert 0 < quiet.cases[0].mdc < 0.05
    assert noisy.cases[0].mdc > 10 * quiet.cases[0].mdc


def test_a_regression_must_hold_when_re_measured():
    from ci_bench.judge.stats import stats_of
    from tests.harness.factories import samples

    base = baseline_of(results([case(A, 1.0)]))
    flagged = case(A, 1.25)
    held = flagged.model_copy(update={"confirmation": stats_of(samples(1.24), warmup=5)})
    gone = flagged.model_copy(update={"confirmation": stats_of(samples(1.0), warmup=5)})
    confirmed = compare(results([held]), lookup(base), T, FailPolicy()).cases[0]
    assert confirmed.verdict == "regression"
    assert confirmed.confirmed is True
    assert "confirmed on re-measurement" in confirmed.reason
    refuted = compare(results([gone]), lookup(base), T, FailPolicy())
    assert refuted.cases[0].verdict == "noisy"
    assert refuted.cases[0].confirmed is False
    assert "not reproduced when re-measured" in refuted.cases[0].reason
    assert refuted.exit_code == ExitCode.OK
