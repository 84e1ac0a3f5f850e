"""The pull-request verdict and the states issue 11 added: pure judging, no measuring."""

from __future__ import annotations

from pathlib import Path

import pytest

from ci_bench.errors import ExitCode
from ci_bench.judge.ab import ab_report
from ci_bench.judge.compare import compare
from ci_bench.judge.pr import pr_report
from ci_bench.schema import FailPolicy, Thresholds
from ci_bench.store.merge import merge_results
from tests.harness.factories import CPU, case, results
from tests.test_compare import A, B, baseline_of, lookup

T = Thresholds()


def ab_of(head_ms: dict[str, float], base_ms: dict[str, float]):
    """An A/B report from deterministic paired samples (same zig-zag, scaled)."""
    head = results([case(cid, ms) for cid, ms in head_ms.items()])
    bases = [case(cid, ms) for cid, ms in base_ms.items()]
    return ab_report(head, bases, "main (abc)", T, FailPolicy())


def test_a_baseline_excess_the_ab_does_not_repeat_is_drift_not_a_failure():
    stored = baseline_of(results([case(A, 1.0), case(B, 1.0)]))
    now = results([case(A, 1.3), case(B, 1.0)])  # the machine (or an earlier merge) moved
    baseline = compare(now, lookup(stored), T, FailPolicy())
    assert {c.id: c.verdict for c in baseline.cases}[A] == "regression"
    ab = ab_of({A: 1.3, B: 1.0}, {A: 1.3, B: 1.0})  # head == base: not this PR
    pr = pr_report(baseline, ab, FailPolicy())
    verdicts = {c.id: c for c in pr.cases}
    assert verdicts[A].verdict == "drift"
    assert "not in the A/B against the base" in verdicts[A].reason
    assert verdicts[A].mean_change == pytest.approx(0.3)  # the baseline diff stays in the row
    assert verdicts[A].ratio == pytest.approx(1.0)
    assert pr.mode == "pr"
    assert pr.exit_code == ExitCode.OK


def test_a_slowdown_the_ab_confirms_is_the_prs_regression():
    stored = baseline_of(results([case(A, 1.0), case(B, 1.0)]))
    baseline = compare(results([case(A, 1.3), case(B, 1.0)]), lookup(stored), T, FailPolicy())
    pr = pr_report(baseline, ab_of({A: 1.3, B: 1.0}, {A: 1.0, B: 1.0}), FailPolicy())
    verdicts = {c.id: c.verdict for c in pr.cases}
    assert verdicts == {A: "regression", B: "pass"}
    assert pr.exit_code == ExitCode.FAILED
    assert pr.headline.startswith("regression: 1 regression")


def test_the_ab_can_fail_a_pr_the_baseline_passes():
    stored = baseline_of(results([case(A, 1.3)]))  # baseline already slow
    baseline = compare(results([case(A, 1.3)]), lookup(stored), T, FailPolicy())
    pr = pr_report(baseline, ab_of({A: 1.3}, {A: 1.0}), FailPolicy())
    assert pr.cases[0].verdict == "regression"
    assert pr.cases[0].reason.startswith("A/B against the base")


def test_another_jax_than_the_baselines_is_toolchain_never_a_regression():
    other = CPU.model_copy(update={"jax": "0.9.0", "jaxlib": "0.9.0"})
    stored = baseline_of(results([case(A, 1.0)], device=other))
    report = compare(results([case(A, 1.5)]), lookup(stored), T, FailPolicy())
    assert report.cases[0].verdict == "toolchain"
    assert "baseline measured with jax 0.9.0" in report.cases[0].reason
    assert report.exit_code == ExitCode.OK


def test_cases_of_the_matrix_never_measured_fail_as_unmeasured():
    run = results([case(A)], matrix=[A, B], complete=False)
    report = compare(run, lookup(baseline_of(results([case(A)]))), T, FailPolicy())
    verdicts = {c.id: c for c in report.cases}
    assert verdicts[B].verdict == "unmeasured"
    assert "the run did not finish" in verdicts[B].reason
    assert report.exit_code == ExitCode.FAILED
    # The file says it did not finish: that fails whatever the policy says of unmeasured
    # cases (and whatever its own matrix lists).
    lenient = compare(run, lookup(None), T, FailPolicy(unmeasured=False))
    assert [r.state for r in lenient.run_states] == ["unfinished"]
    assert lenient.exit_code == ExitCode.FAILED


def test_an_unfinished_file_never_passes_whatever_its_matrix_lists():
    for matrix in ([], [A]):  # empty, or only the measured cases
        run = results([case(A)], matrix=matrix, complete=False)
        report = compare(run, lookup(baseline_of(results([case(A)]))), T, FailPolicy())
        assert report.verdict == "unfinished"
        assert report.exit_code == ExitCode.FAILED


def test_a_lost_shard_leaves_its_cases_unmeasured():
    one = results([case(A)], shard="1/2", matrix=[A, B])
    merged = merge_results([("1.json", one)])
    assert merged.meta.shard is None
    assert merged.meta.complete is False
    report = compare(merged, lookup(None), T, FailPolicy())
    assert {c.id: c.verdict for c in report.cases} == {A: "new", B: "unmeasured"}
    assert report.exit_code == ExitCode.FAILED
    # A shard judged on its own expects only its share of the matrix.
    alone = compare(one, lookup(None), T, FailPolicy())
    assert [c.verdict for c in alone.cases] == ["new"]


def test_a_flag_never_re_measured_is_not_a_regression_in_a_merged_report():
    stored = baseline_of(results([case(A, 1.0)]))
    report = compare(
        results([case(A, 1.3)]), lookup(stored), T, FailPolicy(), require_confirmation=True
    )
    assert report.cases[0].verdict == "noisy"
    assert "not confirmed: no re-measurement ran" in report.cases[0].reason


def test_a_speed_up_never_re_measured_is_not_an_improvement_in_a_merged_report():
    stored = baseline_of(results([case(A, 1.0)]))
    report = compare(
        results([case(A, 0.7)]), lookup(stored), T, FailPolicy(), require_confirmation=True
    )
    assert report.cases[0].verdict == "noisy"
    assert "not confirmed: no re-measurement ran" in report.cases[0].reason
    # Judged alone (a shard, or a run without the confirmation pass) it stands.
    alone = compare(results([case(A, 0.7)]), lookup(stored), T, FailPolicy())
    assert alone.cases[0].verdict == "improved"


def test_too_few_repeats_say_how_many_are_needed_and_claim_no_mdc():
    cases = [case(f"matmul/B{i}-M128-K128-N128/float32", 1.0, n=5) for i in range(1, 13)]
    stored = baseline_of(results(cases))
    slower = [case(c.id, 1.3 if i == 0 else 1.0, n=5) for i, c in enumerate(cases)]
    report = compare(results(slower), lookup(stored), T, FailPolicy())
    first = report.cases[0]
    assert first.verdict == "noisy"
    assert first.mdc is None
    # With the baseline's 5 samples fixed: 1/C(13, 5) <= 0.01/12 < 1/C(12, 5).
    assert first.min_repeats == 8
    assert "needs >= 8 repeats" in first.reason
    enough = compare(
        results([case(A, 1.3)]), lookup(baseline_of(results([case(A)]))), T, FailPolicy()
    )
    assert enough.cases[0].min_repeats is None


def test_pinned_kernel_versions_and_a_bare_version_fall_back_per_kernel(tmp_path: Path):
    from datetime import UTC, datetime

    from ci_bench.store.baselines import check_pins, lookups_for, plan_promotions, write_promotions

    run = results([case(A)])
    write_promotions(
        tmp_path,
        plan_promotions(
            run,
            {"matmul": None},
            promoted_at=datetime.now(UTC),
            tag="v0.1.0",
            force=False,
            source="r.json",
        ),
    )
    found = lookups_for(run, tmp_path, [], {"*": "0.1.0"})
    assert found["matmul"].baseline is not None
    assert lookups_for(run, tmp_path, [], {"*": "9.9.9"})["matmul"].note.startswith(
        "no v9.9.9 baseline for matmul"
    )
    from ci_bench.errors import InputError

    with pytest.raises(InputError, match=r"pinned matmul=9\.9\.9"):
        check_pins(tmp_path, {"matmul": "9.9.9"})


def test_an_unfinished_version_1_file_is_refused_by_the_gate(tmp_path):
    from tests.conftest import run_cli

    old = results([case(A)], complete=False).model_dump(mode="json")
    old["schema_version"] = 1
    del old["meta"]["matrix"]
    path = tmp_path / "old.json"
    import json

    path.write_text(json.dumps(old))
    done = run_cli("compare", str(path), "--baselines-dir", str(tmp_path), cwd=tmp_path)
    assert done.returncode == ExitCode.USAGE
    assert "the run did not finish" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
