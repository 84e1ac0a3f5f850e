"""The Δ bar of the PR comment's tables: the sign is the side, a block is a threshold."""

from __future__ import annotations

import math

import pytest

from ci_bench.report.chart import BAR_CELLS, bar_legend, delta_bar


@pytest.mark.parametrize(
    ("change", "bar"),
    [
        (0.0, "·····│·····"),
        (0.012, "·····│·····"),  # under half a threshold: nothing to see
        (0.05, "·····│█····"),
        (0.075, "·····│█▌···"),
        (0.12, "·····│██▌··"),
        (0.25, "·····│█████"),
        (0.40, "·····│████+"),  # beyond the scale: the last cell says so
        (-0.05, "····█│·····"),
        (-0.12, "··▐██│·····"),
        (-0.30, "+████│·····"),
    ],
)
def test_the_bar_grows_right_when_slower_and_left_when_faster(change, bar):
    assert delta_bar(change, 0.05) == bar
    assert len(bar) == 2 * BAR_CELLS + 1


def test_no_change_no_bar():
    assert delta_bar(None, 0.05) == ""
    assert delta_bar(math.nan, 0.05) == ""
    assert delta_bar(0.1, 0.0) == ""


def test_the_legend_states_the_scale():
    legend = bar_legend(0.05)
    assert legend.startswith("bar: each █ is 5% (the threshold), ▌ half of it, + beyond 25%")
