"""The sticky PR comment as a reviewer sees it: rendered as GitHub does (GFM through
markdown-it, GitHub's own markdown CSS, vendored) in a 900 px conversation column, in
headless Chromium. Nothing may need horizontal scrolling, collapsed or expanded.

Saves ``comment-900px.png`` and ``comment-900px-expanded.png`` under
``$CI_BENCH_TEST_ARTIFACTS`` when it is set (``.ci/run`` sets it).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from ci_bench.report.comment import markdown_report
from ci_bench.report.sticky import compose
from tests.harness.browser import chromium, needs_chromium, save_screenshot, severe_console_errors
from tests.harness.comment_data import rich_pr_report

pytestmark = needs_chromium

CSS = Path(__file__).parent / "vendor" / "github-markdown-css" / "github-markdown-light.css"
COLUMN_PX = 900  # a conversation column's comment body, padding included
PADDING_PX = 16

# Every element whose content must not be wider than its box (GitHub's CSS makes a wide
# table scroll inside itself instead of widening the page).
OVERFLOW = """
const body = document.getElementById('comment');
const limit = body.getBoundingClientRect().right + 0.5;
const out = [];
for (const el of body.querySelectorAll('table, pre, p, li, h3, h4, summary, blockquote')) {
  if (!el.getClientRects().length) continue;  // inside a closed <details>
  const r = el.getBoundingClientRect();
  if (el.scrollWidth > el.clientWidth + 1 || r.right > limit) {
    out.push([el.tagName, el.textContent.slice(0, 60), el.scrollWidth, el.clientWidth]);
  }
}
return out;
"""


def comment_html(markdown: str) -> str:
    """The comment body as GitHub's renderer shows it: GFM tables, raw HTML allowed
    (``<details>``, ``<sub>``), GitHub's styles, a ``COLUMN_PX`` column."""
    html = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><style>{CSS.read_text(encoding="utf-8")}</style>
<style>body {{ margin: 0; background: #fff; }}
.markdown-body {{ box-sizing: border-box; width: {COLUMN_PX}px; padding: {PADDING_PX}px; }}
</style></head>
<body><article class="markdown-body" id="comment">{html.render(markdown)}</article></body></html>
"""


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    body = compose(None, {"verdict": markdown_report(rich_pr_report())})
    path = tmp_path_factory.mktemp("comment") / "comment.html"
    path.write_text(comment_html(body), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def browser(page, tmp_path_factory):
    with chromium(tmp_path_factory.mktemp("chromium-profile"), COLUMN_PX + 100, 1400) as driver:
        driver.get(page.as_uri())
        yield driver


def _texts(browser, css: str) -> list[str]:
    return [e.text for e in browser.find_elements("css selector", f"#comment {css}")]


def test_the_verdict_what_to_do_and_the_changes_fit_900px(browser):
    assert severe_console_errors(browser) == []
    assert browser.execute_script("return document.documentElement.scrollWidth") <= COLUMN_PX + 100
    headline = _texts(browser, "h3")[0]
    assert headline == "❌ ci-bench: this PR makes 2 cases slower"
    assert any(t.startswith("What to do:") for t in _texts(browser, "p"))
    assert "CPU interpreter — times are not kernel performance" in _texts(browser, "blockquote")[0]
    assert "Changed by this PR" in _texts(browser, "h4")
    assert browser.execute_script(OVERFLOW) == []
    # The bars stay on one line: each is one box of the code span.
    bars = browser.execute_script(
        "return [...document.querySelectorAll('#comment td code')]"
        ".filter(c => c.textContent.includes('│')).map(c => c.getClientRects().length)"
    )
    assert bars
    assert set(bars) == {1}
    save_screenshot(browser, "comment-900px.png")


def test_every_collapsed_table_fits_900px_when_opened(browser):
    browser.execute_script(
        "document.querySelectorAll('#comment details').forEach(d => d.open = true)"
    )
    tables = browser.find_elements("css selector", "#comment details table")
    assert len(tables) >= 4  # per kernel: the verdicts and the figures
    assert browser.execute_script(OVERFLOW) == []
    save_screenshot(browser, "comment-900px-expanded.png")
