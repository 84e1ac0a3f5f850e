"""Headless Chromium for the tests that look at a page as a reader does (Debian's chromium
and chromium-driver through Selenium; ``.ci/run`` installs them with apt-get).

Screenshots go to ``$CI_BENCH_TEST_ARTIFACTS`` (``.ci/run`` sets it to its output folder,
``ci-artifacts/``, which git ignores) when it is set, never into the repository.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

needs_chromium = pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="no Chromium here: apt-get install chromium chromium-driver (as .ci/run does)",
)


@contextlib.contextmanager
def chromium(profile: Path, width: int, height: int) -> Iterator:
    """A headless Chromium that downloads nothing, with its own profile folder."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must download nothing
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", "--hide-scrollbars", f"--window-size={width},{height}",
        f"--user-data-dir={profile}",
    ):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def save_screenshot(driver, name: str) -> Path | None:
    """The whole page as ``name`` under ``$CI_BENCH_TEST_ARTIFACTS``, if it is set."""
    folder = os.environ.get("CI_BENCH_TEST_ARTIFACTS")
    if not folder:
        return None
    path = Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    width = driver.execute_script("return window.innerWidth")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(max(height, 200), 16000))
    driver.save_screenshot(str(path))
    return path


def severe_console_errors(driver) -> list:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
