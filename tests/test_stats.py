from __future__ import annotations

import random

import pytest

from ci_bench.judge.stats import (
    benjamini_hochberg,
    bootstrap_ratio_ci,
    mann_whitney_p,
    median_ci,
    minimum_detectable_change,
    relative_ci_width,
)


def test_median_ci_uses_the_textbook_order_statistics():
    samples = list(range(1, 21))  # n=20: the 95 % interval is [x(6), x(15)]
    assert median_ci(samples) == (6, 15)
    random.shuffle(samples)
    assert median_ci(samples) == (6, 15)


def test_median_ci_covers_the_true_median_about_95_percent_of_the_time():
    rng = random.Random(1)
    hits = 0
    for _ in range(400):
        draw = [rng.lognormvariate(0, 0.5) for _ in range(30)]
        lo, hi = median_ci(draw)
        hits += lo <= 1.0 <= hi  # the lognormal(0, σ) median is 1
    assert 0.91 <= hits / 400 <= 0.99


def test_relative_width_shrinks_with_more_samples():
    rng = random.Random(2)
    few = [rng.gauss(10, 1) for _ in range(10)]
    many = [rng.gauss(10, 1) for _ in range(400)]
    assert relative_ci_width(many) < relative_ci_width(few) / 3


def test_benjamini_hochberg_matches_a_worked_example():
    p = [0.01, 0.04, 0.03, 0.005, 0.5]
    # sorted: 0.005 (≤0.01), 0.01 (≤0.02), 0.03 (≤0.03), 0.04 (>0.04? 0.04≤0.04), 0.5
    assert benjamini_hochberg(p, 0.05) == [True, True, True, True, False]
    assert benjamini_hochberg([0.02, 0.9, 0.9, 0.9], 0.05) == [False, False, False, False]
    assert benjamini_hochberg([], 0.05) == []


def test_mann_whitney_direction_and_degenerate_inputs():
    slow = [2.0 + i * 0.01 for i in range(20)]
    fast = [1.0 + i * 0.01 for i in range(20)]
    assert mann_whitney_p(slow, fast, "greater") < 1e-6
    assert mann_whitney_p(slow, fast, "less") > 0.99
    assert mann_whitney_p([1.0], fast, "greater") == 1.0
    assert mann_whitney_p([1.0] * 5, [1.0] * 5, "greater") == 1.0


def test_minimum_detectable_change_grows_with_noise():
    rng = random.Random(3)
    quiet = [rng.gauss(1, 0.01) for _ in range(20)]
    noisy = [rng.gauss(1, 0.10) for _ in range(20)]
    q = minimum_detectable_change(quiet, quiet, alpha=0.01)
    n = minimum_detectable_change(noisy, noisy, alpha=0.01)
    assert 0.005 < q < 0.03
    assert n > 5 * q
    assert minimum_detectable_change([1.0], quiet, alpha=0.01) is None


def test_bootstrap_ratio_interval_brackets_a_known_ratio():
    rng = random.Random(4)
    base = [rng.gauss(1, 0.05) for _ in range(40)]
    head = [b * 1.10 * rng.gauss(1, 0.01) for b in base]
    point, lo, hi = bootstrap_ratio_ci(head, base)
    assert lo < 1.10 < hi
    assert point == pytest.approx(1.10, abs=0.01)
    assert hi - lo < 0.02
    with pytest.raises(ValueError, match="equal"):
        bootstrap_ratio_ci([1.0], [1.0, 2.0])
