"""The dashboard in a real browser: Debian's headless Chromium driven by Selenium.

Builds the site from the generated history (36 commits, two versions, an injected step, a
false alarm on a commit that changed nothing) with the real CLI, opens it from ``file://``
and checks what a reader would see: every commit's point drawn, the version boundary, the
change point at the injected step, the flags summarised at the top with what the history
says of them (confirmed, not confirmed), axes on which noise cannot look like a step, no
label outside its chart, no console error, filters that work; and, on an interpreted CPU
history, the interpreter's banner. Skipped, with the reason, only where no Chromium is
installed (``.ci/run`` installs it with apt-get). Screenshots go to
``$CI_BENCH_TEST_ARTIFACTS`` when it is set (``.ci/run`` sets it to ``ci-artifacts/``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ci_bench.store.history import append_local
from tests.conftest import run_cli
from tests.harness.browser import chromium, needs_chromium, save_screenshot, severe_console_errors
from tests.harness.factories import CPU
from tests.harness.history_data import (
    CASES,
    FALSE_ALARM_AT,
    FALSE_ALARM_CASE,
    STEP_AT,
    STEP_CASE,
    sha,
    story,
)

pytestmark = needs_chromium


def build_site(root: Path, records) -> Path:
    for record in records:
        append_local(root / "history", record)
    proc = run_cli(
        "site", "--out", str(root / "out"), "--history", str(root / "history"),
        "--no-baselines", "--repo-url", "https://github.com/octo-org/kernels", cwd=root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return root / "out" / "index.html"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return build_site(tmp_path_factory.mktemp("site"), story().records)


@pytest.fixture(scope="module")
def browser(site, tmp_path_factory):
    with chromium(tmp_path_factory.mktemp("chromium-profile"), 1300, 2400) as driver:
        driver.get(site.as_uri())
        yield driver


def visible(driver, css: str) -> list:
    return [e for e in driver.find_elements("css selector", css) if e.is_displayed()]


def choose(driver, select_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", select_id)).select_by_value(value)


def test_the_page_draws_every_commit_and_the_step(browser):
    assert severe_console_errors(browser) == []
    cards = browser.find_elements("css selector", ".card.case")
    assert sorted(c.get_attribute("data-case") for c in cards) == sorted(CASES)
    commits = len(story().records)
    for card in cards:
        assert len(card.find_elements("css selector", "circle.pt")) == commits
        assert len(card.find_elements("css selector", "polygon.band")) == 1
        assert len(card.find_elements("css selector", "line.vboundary")) == 1
    step = browser.find_element("css selector", f'.card.case[data-case="{STEP_CASE}"]')
    (change,) = step.find_elements("css selector", "line.changepoint")
    (marker,) = step.find_elements("css selector", "polygon.regression-marker")
    assert marker.get_attribute("data-status") == "confirmed"
    records = story().records
    x = float(change.get_attribute("x1"))
    dots = [
        step.find_element("css selector", f'circle[data-sha="{r.commit}"]')
        for r in (records[STEP_AT - 1], records[STEP_AT])
    ]
    before, after = (float(d.get_attribute("cx")) for d in dots)
    assert before < x < after
    assert "+2" in step.find_element("css selector", "text.cplabel").text  # ~ +25 %
    rooflines = browser.find_elements("css selector", "svg.roofline-chart")
    assert len(rooflines) == 2
    for chart in rooflines:
        assert len(chart.find_elements("css selector", "circle.roof-pt")) == len(CASES)
        assert len(chart.find_elements("css selector", "polyline.roof")) == 1


def test_filters_and_the_table_view(browser):
    assert len(visible(browser, ".card.case")) == len(CASES)
    choose(browser, "f-dtype", "bfloat16")
    shown = visible(browser, ".card.case")
    assert {c.get_attribute("data-dtype") for c in shown} == {"bfloat16"}
    assert len(shown) == 2
    box = browser.find_element("id", "f-shape")
    box.send_keys("M1024")
    assert [c.get_attribute("data-case") for c in visible(browser, ".card.case")] == [STEP_CASE]
    assert browser.find_element("id", "f-count").text == "1 of 4 cases"
    choose(browser, "f-view", "table")
    assert visible(browser, ".card.case") == []
    rows = visible(browser, "table.history-table tr[data-dtype]")
    assert len(rows) == len(story().records)
    assert {r.find_element("css selector", "td").text for r in rows} == {STEP_CASE}
    link = rows[STEP_AT].find_element("css selector", "a")
    assert link.get_attribute("href").endswith(story().step_commit)
    choose(browser, "f-view", "charts")
    choose(browser, "f-dtype", "")
    box.clear()
    box.send_keys(" ")  # an input event with an empty filter
    assert len(visible(browser, ".card.case")) == len(CASES)
    assert severe_console_errors(browser) == []


def test_every_flag_is_summarised_at_the_top_with_what_the_history_says(browser):
    rows = browser.find_elements("css selector", "#flagged tr.flag")
    by_status = {r.get_attribute("data-status"): r for r in rows}
    assert sorted(by_status) == ["confirmed", "unconfirmed"]
    confirmed, unconfirmed = by_status["confirmed"], by_status["unconfirmed"]
    assert confirmed.get_attribute("data-sha") == story().step_commit
    assert STEP_CASE in confirmed.text
    assert "+2" in confirmed.text  # the level moved ~ +25 %
    assert unconfirmed.get_attribute("data-sha") == sha(FALSE_ALARM_AT)
    assert FALSE_ALARM_CASE in unconfirmed.text
    assert "no level change" in unconfirmed.text
    link = confirmed.find_element("css selector", "a")
    assert link.get_attribute("href").endswith(story().step_commit)
    heading = browser.find_element("css selector", "#flagged h2").text
    assert heading == "Flagged: 1 confirmed, 1 not confirmed, 0 pending"
    # The chart tells the two apart too: the false alarm's marker is not the filled one.
    card = browser.find_element("css selector", f'.card.case[data-case="{FALSE_ALARM_CASE}"]')
    (marker,) = card.find_elements("css selector", "polygon.regression-marker")
    assert marker.get_attribute("data-status") == "unconfirmed"
    assert marker.get_attribute("data-sha") == sha(FALSE_ALARM_AT)
    assert card.find_elements("css selector", "line.changepoint") == []
    assert browser.find_elements("id", "interp-banner") == []  # a TPU history


def plotted_spread(card) -> float:
    """How much of the plot's height a case's points span (0..1)."""
    chart = card.find_element("css selector", "svg.trend-chart")
    ys = [float(c.get_attribute("cy")) for c in chart.find_elements("css selector", "circle.pt")]
    axis = chart.find_element("css selector", "line.axis")  # the y axis: top to bottom
    top, bottom = float(axis.get_attribute("y1")), float(axis.get_attribute("y2"))
    return (max(ys) - min(ys)) / (bottom - top)


def labels_outside_their_chart(driver) -> list[str]:
    return driver.execute_script(
        """
        var out = [];
        document.querySelectorAll("svg").forEach(function (svg) {
          var box = svg.getBoundingClientRect();
          svg.querySelectorAll("text").forEach(function (t) {
            var r = t.getBoundingClientRect();
            if (r.width === 0) return;  // hidden by a filter
            if (r.left < box.left - 0.5 || r.right > box.right + 0.5 ||
                r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5) out.push(t.textContent);
          });
        });
        return out;
        """
    )


def labels_on_top_of_each_other(driver) -> list[str]:
    return driver.execute_script(
        """
        var out = [];
        document.querySelectorAll("svg").forEach(function (svg) {
          var ts = Array.prototype.slice.call(svg.querySelectorAll("text"))
            .map(function (t) { return [t.textContent, t.getBoundingClientRect()]; })
            .filter(function (p) { return p[1].width > 0; });
          for (var i = 0; i < ts.length; i++) for (var j = i + 1; j < ts.length; j++) {
            var a = ts[i][1], b = ts[j][1];
            if (a.left < b.right - 1 && b.left < a.right - 1 &&
                a.top < b.bottom - 1 && b.top < a.bottom - 1) out.push(ts[i][0] + " / " + ts[j][0]);
          }
        });
        return out;
        """
    )


@pytest.mark.parametrize("scale", ["ms", "delta"])
def test_noise_never_looks_like_a_step_and_no_label_is_clipped(browser, scale):
    choose(browser, "f-scale", scale)
    try:
        charts = browser.find_elements("css selector", "svg.trend-chart")
        assert {c.get_attribute("data-scale") for c in charts} == {scale}
        for chart in charts:
            low, high = (
                float(chart.get_attribute("data-ymin")),
                float(chart.get_attribute("data-ymax")),
            )
            if scale == "ms":
                assert low == 0  # a time axis from zero: never below 0 ms
            else:
                assert low <= -0.2
                assert high >= 0.2
        # A case with only 1.5 % noise spans a small part of the plot (at most ±3σ of a
        # 40 % wide delta axis), a 25 % step far more.
        flat = browser.find_element("css selector", '.card.case[data-case$="N1024/float32"]')
        step = browser.find_element("css selector", f'.card.case[data-case="{STEP_CASE}"]')
        assert plotted_spread(flat) < (0.1 if scale == "ms" else 0.25)
        assert plotted_spread(step) > 2.5 * plotted_spread(flat)
        assert labels_outside_their_chart(browser) == []
        assert labels_on_top_of_each_other(browser) == []
        assert severe_console_errors(browser) == []
        save_screenshot(browser, f"dashboard-{scale}.png")
    finally:
        choose(browser, "f-scale", "ms")


def test_an_interpreted_history_says_so_everywhere(tmp_path):
    index = build_site(tmp_path, story(commits=8, device=CPU).records)
    with chromium(tmp_path / "profile", 1300, 1600) as driver:
        driver.get(index.as_uri())
        banner = driver.find_element("id", "interp-banner").text
        assert banner.startswith("CPU interpreter — times are not kernel performance")
        note = driver.find_element("css selector", "section.group .interp-note").text
        assert "interpreter's" in note
        ylabels = driver.find_elements("css selector", "svg.trend-chart text.ylabel")
        assert len(ylabels) == len(CASES)
        assert all("CPU interpreter" in t.text for t in ylabels)
        choose(driver, "f-view", "table")
        heads = [th.text for th in driver.find_elements("css selector", "table.history-table th")]
        assert {"median ms†", "TFLOPS†", "MFU†"} <= set(heads)
        choose(driver, "f-view", "charts")
        assert labels_outside_their_chart(driver) == []
        assert labels_on_top_of_each_other(driver) == []
        assert severe_console_errors(driver) == []
        save_screenshot(driver, "dashboard-interpreted.png")
