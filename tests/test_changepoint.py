"""Change points: PELT (l1 cost, 3·σ·ln n penalty) on log medians."""

from __future__ import annotations

import random

import pytest

from ci_bench.judge.changepoint import detect, noise_sigma, penalty
from ci_bench.report.history import build_groups
from tests.harness.history_data import BOUNDARY, FASTER_CASE, STEP_AT, STEP_CASE, story


def noisy(n: int, seed: int, sigma: float = 0.02) -> list[float]:
    rng = random.Random(seed)
    return [1.0 * (1 + rng.gauss(0, sigma)) for _ in range(n)]


def test_a_step_is_found_at_its_first_commit():
    values = noisy(30, 1)
    values[20:] = [v * 1.15 for v in values[20:]]
    (change,) = detect(values)
    assert change.index == 20
    assert change.change == pytest.approx(0.15, abs=0.03)
    assert change.slower


def test_a_speed_up_is_a_negative_change():
    values = noisy(24, 2)
    values[8:] = [v * 0.8 for v in values[8:]]
    (change,) = detect(values)
    assert change.index == 8
    assert not change.slower


def test_noise_alone_is_rarely_a_change():
    flagged = sum(bool(detect(noisy(30, seed))) for seed in range(40))
    assert flagged <= 2  # about 1 % of pure-noise series at n = 30 (README, "History")


def test_identical_values_and_short_series_have_no_change():
    assert detect([1.0] * 20) == []
    assert detect([1.0, 2.0, 3.0]) == []


def test_one_outlier_is_not_a_level():
    values = noisy(20, 3)
    values[10] *= 1.5
    assert all(c.index not in (10, 11) for c in detect(values))


def test_the_penalty_is_the_stated_one():
    assert penalty(100, 0.01) == pytest.approx(3 * 0.01 * 4.60517, rel=1e-5)
    assert noise_sigma(__import__("numpy").log([1.0] * 10)) == pytest.approx(1e-3)


def test_bad_values_are_refused():
    with pytest.raises(ValueError, match="positive"):
        detect([1.0, 0.0, 1.0, 1.0])


def test_the_generated_history_has_its_two_changes_where_they_were_put():
    (group,) = build_groups(story().records)
    found = {s.id: [c.commit.sha for c in s.changes] for s in group.cases.values()}
    assert found[STEP_CASE] == [group.commits[STEP_AT].sha]
    assert found[FASTER_CASE] == [group.commits[BOUNDARY].sha]
    assert sum(len(v) for v in found.values()) == 2
    (boundary,) = group.cases[FASTER_CASE].changes
    assert boundary.at_version_boundary
    assert [v for _, v in group.boundaries()] == ["0.1.0", "0.2.0"]


def test_a_timer_switch_is_never_a_change_point_nor_searched_across():
    """Issue 50: the TPU default moved from wallclock to profiler; the history's first
    profiler runs read 1/10 of the wallclock ones, and that is no change of the kernel."""
    records = story().records
    switched = [
        r.model_copy(
            update={
                "timer": "profiler",
                "cases": [c.model_copy(update={"median_ms": c.median_ms / 10}) for c in r.cases],
            }
        )
        if i >= STEP_AT
        else r
        for i, r in enumerate(records)
    ]
    (group,) = build_groups(switched)
    found = {s.id: [c.commit.sha for c in s.changes] for s in group.cases.values()}
    # The tenfold drop at the switch is found nowhere; the real step sits on the switch,
    # so with nothing before it on the profiler side it is not a change either, and the
    # version boundary's speed-up (before the switch) is still found.
    assert all(group.commits[STEP_AT].sha not in shas for shas in found.values())
    assert found[FASTER_CASE] == [group.commits[BOUNDARY].sha]
    # The same history with one timer finds the step where it was put.
    (whole,) = build_groups(records)
    steps = {s.id: [c.commit.sha for c in s.changes] for s in whole.cases.values()}
    assert steps[STEP_CASE] == [whole.commits[STEP_AT].sha]
