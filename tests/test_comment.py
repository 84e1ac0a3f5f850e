"""The PR comment as GitHub renders it: structure, not only text (markdown-it, GFM tables)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

import ci_bench
from ci_bench import docs_url
from ci_bench.judge.ab import ab_report
from ci_bench.judge.compare import compare
from ci_bench.judge.pr import pr_report
from ci_bench.report.comment import fit_markdown, markdown_report
from ci_bench.schema import FailPolicy, Thresholds
from tests.harness.comment_data import BASE, DRIFT, FAST, INFO, REG, UNSURE, rich_pr_report
from tests.harness.comment_data import HEAD as RICH_HEAD
from tests.harness.factories import V5E, case, results
from tests.test_compare import baseline_of, lookup
from tests.test_render import report  # noqa: F401  (the golden report fixture)

RUN = "https://github.com/octo/kernels/actions/runs/4242"
HEAD = "a" * 40


class Outline(HTMLParser):
    """Headings, paragraphs and tables (header + rows) in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[tuple[str, object]] = []
        self._text: list[str] | None = None
        self._table: list[list[str]] | None = None
        self._row: list[str] | None = None
        self.details_depth = 0
        self.tables_in_details = 0

    def handle_starttag(self, tag, attrs):
        if tag == "details":
            self.details_depth += 1
        if tag in ("h3", "h4", "p", "th", "td", "li"):
            self._text = []
        if tag == "table":
            self._table = []
            if self.details_depth:
                self.tables_in_details += 1
        if tag == "tr":
            self._row = []

    def handle_endtag(self, tag):
        if tag == "details":
            self.details_depth -= 1
        if tag in ("th", "td") and self._row is not None and self._text is not None:
            self._row.append("".join(self._text).strip())
            self._text = None
        elif tag in ("h3", "h4", "p", "li") and self._text is not None:
            self.blocks.append((tag, "".join(self._text).strip()))
            self._text = None
        if tag == "tr" and self._table is not None and self._row is not None:
            self._table.append(self._row)
        if tag == "table" and self._table is not None:
            self.blocks.append(("table", self._table))
            self._table = None

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)


def render(markdown: str) -> Outline:
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    outline = Outline()
    outline.feed(html)
    assert outline.details_depth == 0, "unbalanced <details>"
    return outline


def pr_comment():
    a, b = "matmul/B1-M1024-K1024-N1024/bfloat16", "matmul/B4-M128-K256-N128/float32"
    c = "matmul/B16-M128-K128-N128/bfloat16"
    stored = baseline_of(results([case(a, 1.0), case(b, 1.0), case(c, 1.0)]))
    baseline = compare(
        results([case(a, 1.3), case(b, 1.3), case(c, 1.0)]),
        lookup(stored),
        Thresholds(),
        FailPolicy(),
    )
    head = results([case(a, 1.3), case(b, 1.3), case(c, 1.0)])
    ab = ab_report(
        head, [case(a, 1.0), case(b, 1.3), case(c, 1.0)], "main (abc)", Thresholds(), FailPolicy()
    )
    pr = pr_report(baseline, ab, FailPolicy())
    return pr.model_copy(update={"head_sha": HEAD, "run_url": RUN})


def test_a_pr_comment_leads_with_the_verdict_then_this_prs_change_then_drift():
    outline = render(markdown_report(pr_comment()))
    kinds = [(k, v if k != "table" else None) for k, v in outline.blocks]
    assert kinds[0] == ("h3", "❌ ci-bench: this PR makes 1 case slower")
    assert any(k == "p" and str(v).startswith("What to do:") for k, v in kinds[:4])
    headings = [v for k, v in outline.blocks if k == "h4"]
    assert headings == ["Changed by this PR", "Drift since the baseline (not caused by this PR)"]
    tables = [v for k, v in outline.blocks if k == "table"]
    changed, drift = tables[0], tables[1]
    assert changed[0] == ["case", "Δ vs base (A/B)¹", "verdict"]
    assert changed[1][0] == "matmul/B1-M1024-K1024-N1024/bfloat16"
    assert changed[1][-1].startswith("❌ regression")
    assert drift[1][-1].startswith("〰️ drift")
    # Every number's meaning is a header or a footnote; the footnotes are in the report.
    text = markdown_report(pr_comment())
    for mark in "¹²³⁴":
        assert f"\n{mark} " in text or text.startswith(f"{mark} ")
    # The footer names the PR head and links the benchmark run.
    assert f"PR head `{HEAD[:12]}`" in text
    assert f"[benchmark run]({RUN})" in text
    # The method links to ci-bench's own docs at the installed version, not the caller's repo.
    assert docs_url("docs/VERDICTS.md", "verdicts-you-can-trust-method") in text
    url = f"https://github.com/ci-bench/ci-bench/blob/v{ci_bench.__version__}/docs/VERDICTS.md#"
    assert url in text
    assert "octo/kernels/blob" not in text


def test_the_visible_tables_fit_a_comment_without_scrolling(report):  # noqa: F811
    """About 880 px: four columns at most above the fold, and rows short enough that the
    verdict column is not pushed off-screen (a proxy: at most ~110 characters a row)."""
    # (The real check, GitHub's CSS at 900 px in Chromium: tests/test_comment_browser.py.)
    for body in (markdown_report(report), markdown_report(pr_comment())):
        visible = body.split("<details>", 1)[0]
        outline = render(visible)
        for kind, table in outline.blocks:
            if kind != "table":
                continue
            assert len(table[0]) <= 4
            assert table[0][-1] == "verdict"
            for row in table[1:]:
                assert sum(len(cell) for cell in row) + 3 * len(row) <= 110, row


def test_the_method_is_one_collapsed_paragraph(report):  # noqa: F811
    text = markdown_report(report)
    method = text.split("<details><summary>Method</summary>", 1)[1].split("</details>", 1)[0]
    assert len([line for line in method.splitlines() if line.strip()]) == 1
    assert text.count("Benjamini") == 0  # no statistics lecture on every PR


@pytest.mark.parametrize("limit", [3000, 1500])
def test_a_long_report_is_cut_to_the_limit_and_says_where_the_rest_is(report, limit):  # noqa: F811
    body = fit_markdown(report, limit, "the job summary")
    assert len(body) <= limit
    assert "see the job summary" in body or len(body) == limit
    render(body)  # still valid, balanced markdown


def test_a_report_too_long_even_without_rows_is_cut_at_a_line_and_says_so(report):  # noqa: F811
    body = fit_markdown(report, 700, "the job summary")
    assert len(body) <= 700
    assert body.endswith("\n\n… cut to fit the comment: see the job summary.\n")
    kept = body.removesuffix("\n\n… cut to fit the comment: see the job summary.\n")
    whole = markdown_report(report, full_matrix=False, max_rows=0)
    assert whole.startswith(kept.removesuffix("\n\n</details>") + "\n")  # whole lines
    render(body)  # still valid, balanced markdown


def _sections(markdown: str) -> dict[str, list[object]]:
    """Blocks under each h4 heading (before the first collapsed block)."""
    sections: dict[str, list[object]] = {}
    current = None
    for kind, value in render(markdown.split("<details>", 1)[0]).blocks:
        if kind == "h4":
            current = str(value)
            sections[current] = []
        elif current is not None:
            sections[current].append(value)
    return sections


def test_changed_by_this_pr_lists_only_what_the_ab_calls_changed_the_rest_in_one_line():
    body = markdown_report(rich_pr_report())
    sections = _sections(body)
    changed = next(v for v in sections["Changed by this PR"] if isinstance(v, list))
    ids = [row[0] for row in changed[1:]]
    assert ids[:2] == [REG, f"{REG}/backward"]  # the worst first, its modes together
    assert {UNSURE, FAST} <= set(ids)  # unsure (noisy) and faster are changes
    assert INFO not in ids  # its A/B saw nothing: the baseline's +8 % is information
    assert DRIFT not in ids
    assert "✅ 2 other cases: no change past ±5% in the A/B against the base" in body
    # The baseline excess that is not established drift: one collapsed line.
    assert (
        "<details><summary>ℹ️ 1 case past ±5% against the stored baseline, not established "
        "as drift: information, not a warning</summary>"
    ) in body
    drift = next(v for v in sections["Drift since the baseline (not caused by this PR)"])
    assert [row[0] for row in drift[1:]] == [DRIFT]  # type: ignore[index]


def test_every_p_value_names_its_comparison_and_every_sha_is_short():
    for body in (markdown_report(rich_pr_report()), markdown_report(pr_comment())):
        assert re.search(r"\(p[=<]", body) is None, "a bare p-value"
        assert "(A/B p=" in body or "(A/B p<" in body
        assert re.search(r"[0-9a-f]{40}", body) is None, "a full sha"
    body = markdown_report(rich_pr_report())
    assert "⚠️ noisy (A/B p=0.023)" in body
    assert "〰️ drift (baseline p<0.001)" in body
    assert f"A/B base: main ({BASE[:12]})" in body
    assert f"PR head `{RICH_HEAD[:12]}`" in body
    # No per-kernel note repeating which comparison decides (the method line says it).
    assert "PR verdict:" not in body
    assert "> matmul:" not in body
    assert "mermaid" not in body  # GitHub's renderer cannot be checked here


def test_interpreted_times_are_said_to_be_the_interpreters_everywhere():
    body = markdown_report(rich_pr_report())
    visible = body.split("<details>", 1)[0]
    assert "CPU interpreter — times are not kernel performance" in visible
    assert "speedup†" in body
    assert "TFLOPS†" in body
    assert "MFU / HBM³†" in body
    on_tpu = results([case("matmul/B1-M128-K128-N128/float32")], device=V5E)
    stored = baseline_of(on_tpu)
    tpu_body = markdown_report(compare(on_tpu, lookup(stored), Thresholds(), FailPolicy()))
    assert "interpreter" not in tpu_body
    assert "†" not in tpu_body
