"""What a newcomer reads after a first run and a first compare: what the figures are, what
to do next, and a comparison outside a pull request that speaks of the baseline."""

from __future__ import annotations

from ci_bench.store.files import dump_model
from tests.conftest import run_cli
from tests.harness.factories import case, results

A = "matmul/B1-M128-K128-N128/float32"
B = "matmul/B1-M256-K256-N256/float32"


def _files(tmp_path, baseline_ms: float, current, *, promote: bool = True):
    (tmp_path / "base.json").write_text(dump_model(results([case(A, baseline_ms)])))
    (tmp_path / "now.json").write_text(dump_model(results(current)))
    if promote:
        done = run_cli(
            "promote", "base.json", "--tag", "local", "--baselines-dir", "bl", cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr


def test_compare_outside_a_pull_request_speaks_of_the_baseline(tmp_path):
    _files(tmp_path, 1.0, [case(A, 1.6)])
    done = run_cli("compare", "now.json", "--baselines-dir", "bl", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    text = done.stdout
    assert "this pr" not in text.lower()
    assert "baseline ms" in text  # kept within 120 columns
    assert max(len(line) for line in text.splitlines()) <= 120
    assert "Pallas ms: the mean of the Pallas kernel's timed calls" in " ".join(text.split())
    assert "`ci-bench ab --base REF` times both versions in one process" in " ".join(text.split())

    markdown = run_cli(
        "compare", "now.json", "--baselines-dir", "bl", "--format", "markdown", cwd=tmp_path
    ).stdout
    assert "this pr" not in markdown.lower()
    assert "slower than the stored baseline" in markdown
    assert "reproduced on re-measurement" not in markdown  # compare re-measured nothing
    assert "1 regression — 1 case" in markdown


def test_compare_of_nothing_measured_says_why_and_what_next(tmp_path):
    _files(tmp_path, 1.0, [case(A, status="error"), case(B, status="error")])
    done = run_cli("compare", "now.json", "--baselines-dir", "bl", cwd=tmp_path)
    assert done.returncode == 3
    assert "nothing measured (exit 3): every case failed" in done.stdout
    assert "`ci-bench check-spec --run`" in done.stdout  # runs the cases: catches it (issue 41)
