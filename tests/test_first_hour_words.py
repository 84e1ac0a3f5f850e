"""Words a newcomer reads first: ``ab``'s columns say what they hold (``base ms``; Δ the
median paired change, checked against the numbers the table prints), every column a
verdict table prints is in its legend, and the banner names the interpreter that ran."""

from __future__ import annotations

import re

import pytest

from ci_bench.judge.ab import ab_report
from ci_bench.judge.compare import compare
from ci_bench.report.render import interpreted_banner, results_table
from ci_bench.report.terminal import terminal_report
from ci_bench.samples import stats_of
from ci_bench.schema import FailPolicy, Report, Thresholds
from tests.harness.factories import case, results

A = "matmul/B1-M128-K128-N128/float32"


def _ab() -> Report:
    """Nine rounds where head takes twice the base's time and one where it takes twenty
    times: the median paired change (+100 %) is far from the change of the means (+280 %)."""
    head_ms = [2.0] * 9 + [20.0]
    base_ms = [1.0] * 10
    head = case(A).model_copy(update={"pallas": stats_of([x / 1e3 for x in head_ms], 5)})
    base = case(A).model_copy(update={"pallas": stats_of([x / 1e3 for x in base_ms], 5)})
    return ab_report(results([head]), [base], "main", Thresholds(), FailPolicy())


def _table(text: str) -> tuple[list[str], list[str]]:
    """The header's column names and the case's cells (columns are 2+ spaces apart)."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("case "))
    dashes = lines[at + 1]
    spans = [m.span() for m in re.finditer(r"-+", dashes)]
    row = next(line for line in lines[at + 2 :] if line.startswith(A))

    def cells(line: str) -> list[str]:
        return [line[a:b].strip() for a, b in spans[:-1]] + [line[spans[-1][0] :].strip()]

    return cells(lines[at]), cells(row)


def _legend(text: str) -> str:
    start = text.index("Columns: ")
    return " ".join(line.strip() for line in text[start:].split(".\n")[0].splitlines())


def test_abs_delta_is_the_median_paired_change_the_legend_says_it_is() -> None:
    text = terminal_report(_ab(), wide=True)
    headers, cells = _table(text)
    assert "base ms" in headers
    assert "baseline ms" not in headers
    row = dict(zip(headers, cells, strict=True))
    pallas = float(row["Pallas ms†"])
    base = float(row["base ms"])
    delta = float(row["Δ"].split()[0].rstrip("%")) / 100
    assert (pallas, base) == (pytest.approx(3.8), pytest.approx(1.0))
    assert delta == pytest.approx(1.0, abs=0.001)  # the median of the ten ratios, minus 1
    assert abs(delta - (pallas / base - 1)) > 1  # not the change of the printed means
    legend = _legend(text)
    assert "Δ: the median of the paired head/base time ratios − 1" in legend
    assert "not the ratio of the two means" in legend
    assert "base ms: the base ref's Pallas mean" in legend


def _baseline_report() -> Report:
    from datetime import UTC, datetime
    from pathlib import Path

    from ci_bench.store.baselines import BaselineFile, Lookup, entry_from_results

    base = results([case(A, 1.0, peak_bytes=3000)])
    entry = entry_from_results(base, "matmul", datetime(2026, 11, 2, tzinfo=UTC), "v0.1.0")
    doc = BaselineFile(kernel="matmul", version="0.1.0", entries=[entry])
    lookup = {"matmul": Lookup("matmul", "0.1.0", Path("baselines/matmul_v0.1.0.json"), doc, None)}
    current = results([case(A, 1.3, peak_bytes=6000)])
    return compare(current, lookup, Thresholds(), FailPolicy())


@pytest.mark.parametrize("wide", [False, True], ids=["fitted", "wide"])
@pytest.mark.parametrize("which", ["compare", "ab"])
def test_every_printed_column_is_in_the_legend_and_no_left_out_one(which, wide) -> None:
    text = terminal_report(_baseline_report() if which == "compare" else _ab(), wide=wide)
    headers, _ = _table(text)
    legend = _legend(text)
    for column in headers[1:]:
        assert f"{column.rstrip('†')}: " in legend, column
    if wide and which == "compare":
        assert {"MDC", "mem Δ"} <= set(headers)
    named = [part.split(": ", 1)[0] for part in legend.removeprefix("Columns: ").split("; ")]
    assert sorted(named) == sorted(h.rstrip("†") for h in headers[1:])


def test_the_banner_names_the_interpreter_that_ran() -> None:
    tpu = interpreted_banner(["tpu"])
    assert "jax's TPU interpreter" in tpu
    assert "interpret=True" not in tpu
    own = interpreted_banner(["kernel"])
    assert "interpret=True" in own
    assert "TPU interpreter" not in own
    assert "interpret=True" in interpreted_banner([None])  # a results file before the mode
    both = interpreted_banner(["tpu", "kernel"])
    assert "jax's TPU interpreter" in both
    assert "interpret=True for the others" in both


@pytest.mark.parametrize(
    ("mode", "words"), [("tpu", "jax's TPU interpreter"), ("kernel", "interpret=True")]
)
def test_a_report_and_a_run_table_name_the_interpreter_of_their_run(mode, words) -> None:
    report = _baseline_report()
    settings = report.meta.settings.model_copy(update={"interpret_mode": mode})
    report = report.model_copy(
        update={"meta": report.meta.model_copy(update={"settings": settings})}
    )
    first = terminal_report(report).splitlines()[0]
    assert first.startswith("† CPU interpreter")
    assert words in first
    table = results_table([case(A)], interpreted=True, interpreters=[mode])
    assert words in table.splitlines()[0]


def test_a_kernel_the_config_switched_to_the_tpu_interpreter_is_named_in_every_banner() -> None:
    """The run-wide mode says ``kernel``; the config (``cpu-interpret-tpu``) ran this kernel
    under jax's TPU interpreter: compare's banner, the comment's and its footnote say so."""
    from ci_bench.report.comment import markdown_report
    from ci_bench.report.comment_tables import footnotes

    report = _baseline_report()
    settings = report.meta.settings.model_copy(
        update={"interpret_mode": "kernel", "kernel_interpret": {"matmul": "tpu"}}
    )
    report = report.model_copy(
        update={"meta": report.meta.model_copy(update={"settings": settings})}
    )
    for text in (terminal_report(report).splitlines()[0], footnotes(report)):
        assert "jax's TPU interpreter" in text
        assert "interpret=True" not in text
    assert "jax's TPU interpreter" in markdown_report(report)
    # A file written before per-kernel modes were recorded reads as the run-wide mode.
    older = report.meta.settings.model_copy(update={"kernel_interpret": {}})
    assert older.interpreters(["matmul"]) == ["kernel"]
    assert older.comparable(settings)  # a baseline without them still compares


def test_lowers_table_fits_120_columns_and_puts_errors_under_it() -> None:
    from ci_bench.report.lowering_table import lowering_table
    from ci_bench.schema.lowering import LoweredCase

    long_id = "flash_attention/B16-H32-T8192-D128-W4096/bfloat16/forward+backward"
    error = "MosaicError: " + "the block shape (8, 129) is not divisible by the tiling " * 8
    cases = [
        LoweredCase(
            id=long_id, kernel="flash_attention", version="0.1.0", params={"B": 16},
            dtype="bfloat16", platform="tpu", status="ok", kind="mosaic",
            custom_calls=["tpu_custom_call", "tpu_custom_call_2", "tpu_custom_call_3"],
        ),
        LoweredCase(
            id=A, kernel="matmul", version="0.1.0", params={"B": 1}, dtype="float32",
            platform="tpu", status="error", error=error,
        ),
    ]  # fmt: skip
    text = lowering_table(cases)
    assert max(len(line) for line in text.splitlines()) <= 120
    header = text.splitlines()[0]
    assert header.split()[:2] == ["case", "status"]
    assert "error" not in header
    under = text.split("\n\n")[-1]
    assert under.startswith(f"{A}: error: MosaicError: the block shape")
    assert " ".join(under.split()).endswith("not divisible by the tiling")
    assert "(left out to fit 120 columns: custom calls;" in text
    assert "tpu_custom_call, tpu_custom_call_2 +1" in lowering_table(cases, width=None)


def test_gitignore_lines_are_added_once_and_nothing_of_the_adopters_is_lost() -> None:
    from ci_bench.pipeline.adopt import GITIGNORED, with_gitignore

    action, text, added = with_gitignore(None)
    assert action == "create"
    assert added == list(GITIGNORED)
    assert [line for line in text.splitlines() if not line.startswith("#")] == list(GITIGNORED)
    assert with_gitignore(text) == ("unchanged", text, [])

    mine = "node_modules/\n/.cache\n*.pyc"  # no final newline; .cache/ already ignored
    action, text, added = with_gitignore(mine)
    assert action == "add to"
    assert added == ["ci-bench-preview/", "ci-bench-out/"]
    assert text.startswith("node_modules/\n/.cache\n*.pyc\n\n# ci-bench:")
    assert text.endswith("ci-bench-preview/\nci-bench-out/\n")
    again = with_gitignore(text)
    assert again == ("unchanged", text, [])
    # A line removed by hand comes back, its heading not twice.
    fewer = text.replace("ci-bench-out/\n", "")
    action, text2, added = with_gitignore(fewer)
    assert (action, added) == ("add to", ["ci-bench-out/"])
    assert text2.count("# ci-bench:") == 1
