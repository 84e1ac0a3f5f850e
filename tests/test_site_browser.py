"""The dashboard in a real browser: Debian's headless Chromium driven by Selenium.

Builds the site from the generated history (36 commits, two versions, an injected step)
with the real CLI, opens it from ``file://`` and checks what a reader would see: every
commit's point drawn, the version boundary, the change point at the injected step, the
regression marker, no console error, and filters that work. Skipped, with the reason,
only where no Chromium is installed (``.ci/run`` installs it with apt-get).
Set ``CI_BENCH_SCREENSHOT=/tmp/site.png`` to keep a screenshot.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ci_bench.store.history import append_local
from tests.conftest import run_cli
from tests.history_data import CASES, STEP_AT, STEP_CASE, story

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="no Chromium here: apt-get install chromium chromium-driver (as .ci/run does)",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("site")
    for record in story().records:
        append_local(root / "history", record)
    proc = run_cli(
        "site", "--out", str(root / "out"), "--history", str(root / "history"),
        "--no-baselines", "--repo-url", "https://github.com/octo-org/kernels", cwd=root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return root / "out" / "index.html"


@pytest.fixture(scope="module")
def browser(site, tmp_path_factory):
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must download nothing
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--window-size=1300,2400",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    try:
        driver.get(site.as_uri())
        yield driver
    finally:
        driver.quit()


def visible(driver, css: str) -> list:
    return [e for e in driver.find_elements("css selector", css) if e.is_displayed()]


def choose(driver, select_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", select_id)).select_by_value(value)


def test_the_page_draws_every_commit_and_the_step(browser):
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []
    cards = browser.find_elements("css selector", ".card.case")
    assert sorted(c.get_attribute("data-case") for c in cards) == sorted(CASES)
    commits = len(story().records)
    for card in cards:
        assert len(card.find_elements("css selector", "circle.pt")) == commits
        assert len(card.find_elements("css selector", "polygon.band")) == 1
        assert len(card.find_elements("css selector", "line.vboundary")) == 1
    step = browser.find_element("css selector", f'.card.case[data-case="{STEP_CASE}"]')
    (change,) = step.find_elements("css selector", "line.changepoint")
    assert len(step.find_elements("css selector", "polygon.regression-marker")) == 1
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
    shot = os.environ.get("CI_BENCH_SCREENSHOT")
    if shot:
        browser.save_screenshot(shot)


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
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
