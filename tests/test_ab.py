"""A/B in one process: paired-ratio verdicts (pure) and ``ci-bench ab`` on a real git repo."""

from __future__ import annotations

import json
import subprocess

import pytest

from ci_bench.errors import ExitCode
from ci_bench.judge.ab import judge_pairs
from ci_bench.judge.stats import stats_of
from ci_bench.schema import Thresholds
from tests.conftest import run_cli, write_project
from tests.harness.factories import case

A = "matmul/B1-M128-K128-N128/float32"
T = Thresholds()


def paired(head_ms: list[float], base_ms: list[float]):
    head = case(A).model_copy(update={"pallas": stats_of([x / 1e3 for x in head_ms], 5)})
    base = case(A).model_copy(update={"pallas": stats_of([x / 1e3 for x in base_ms], 5)})
    return head, base


def drifting(n: int = 30) -> list[float]:
    """A machine that drifts: each round is slower than the last (paired rounds cancel it)."""
    return [1.0 + 0.05 * i for i in range(n)]


def test_a_paired_slowdown_beyond_the_threshold_is_a_regression_despite_drift():
    base = drifting()
    head = [b * 1.2 * (1 + 0.002 * ((i % 3) - 1)) for i, b in enumerate(base)]
    (verdict,) = judge_pairs([paired(head, base)], T)
    assert verdict.verdict == "regression"
    assert verdict.ratio_low <= verdict.ratio <= verdict.ratio_high
    assert verdict.ratio == pytest.approx(1.2, abs=0.01)
    assert verdict.ratio_low > 1.05


def test_identical_code_passes_and_the_interval_straddles_one():
    base = drifting()
    head = [b * (1 + 0.01 * ((i % 5) - 2)) for i, b in enumerate(base)]
    (verdict,) = judge_pairs([paired(head, base)], T)
    assert verdict.verdict == "pass"
    assert verdict.ratio_low <= 1.0 <= verdict.ratio_high
    assert verdict.p_value is None


def test_a_ratio_past_the_threshold_without_evidence_is_noisy():
    base = [1.0] * 12
    head = [1.3, 0.8, 1.4, 0.9, 1.2, 0.85, 1.35, 0.95, 1.25, 1.1, 1.06, 1.07]
    (verdict,) = judge_pairs([paired(head, base)], T)
    assert verdict.verdict == "noisy"


def test_a_flagged_ratio_must_hold_when_re_measured():
    base = drifting()
    head = [b * 1.2 for b in base]
    h, b = paired(head, base)
    same = stats_of([x / 1e3 for x in base], 5)
    h = h.model_copy(update={"confirmation": same})
    b = b.model_copy(update={"confirmation": same})
    (verdict,) = judge_pairs([(h, b)], T)
    assert verdict.verdict == "noisy"
    assert verdict.confirmed is False


TOY = """
import dataclasses
from kernels.matmul import SPEC as MATMUL
SPEC = dataclasses.replace(MATMUL, name="toy", version="{version}")
"""


def git(folder, *args):
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    write_project(tmp_path, ["toy"])
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "config", "user.email", "t@example.com")
    git(tmp_path, "config", "user.name", "t")
    (tmp_path / "toy.py").write_text(TOY.format(version="0.1.0"))
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "toy 0.1.0")
    (tmp_path / "toy.py").write_text(TOY.format(version="0.2.0"))
    git(tmp_path, "commit", "-q", "-am", "toy 0.2.0")
    return tmp_path


def test_ab_measures_head_and_base_in_one_process_and_cleans_up(repo):
    out = repo / "report.json"
    done = run_cli(
        "ab",
        "--base",
        "HEAD~1",
        "--case",
        "toy/B1-M128-*",
        "--repeats",
        "6",
        "--warmup",
        "1",
        "-o",
        str(out),
        cwd=repo,
    )
    assert done.returncode in (ExitCode.OK, ExitCode.FAILED), done.stderr
    report = json.loads(out.read_text())
    assert report["mode"] == "ab"
    assert report["base_ref"].startswith("HEAD~1 (")
    (kernel,) = report["kernels"]
    assert (kernel["version"], kernel["baseline_version"]) == ("0.2.0", "0.1.0")
    # both dtypes, forward and backward: head's and base's VJPs are paired like forwards
    assert len(report["cases"]) == 4
    assert {v["current"]["mode"] for v in report["cases"]} == {"forward", "backward"}
    for verdict in report["cases"]:
        assert verdict["ratio_low"] <= verdict["ratio"] <= verdict["ratio_high"]
        assert verdict["current"]["version"] == "0.2.0"
        assert verdict["baseline"]["version"] == "0.1.0"
        assert len(verdict["current"]["pallas"]["samples_ms"]) >= 6
    assert "[" in done.stdout  # the interval is in the table
    assert max(len(line) for line in done.stdout.splitlines()) <= 120  # a terminal's width
    assert "A/B: head against HEAD~1" in done.stdout
    worktrees = subprocess.run(
        ["git", "-C", str(repo), "worktree", "list"], capture_output=True, text=True, check=True
    ).stdout
    assert len(worktrees.strip().splitlines()) == 1


def test_ab_with_an_unknown_ref_is_a_one_line_error(repo):
    done = run_cli("ab", "--base", "no-such-ref", cwd=repo)
    assert done.returncode == ExitCode.USAGE
    # Said in ci-bench's words, before anything is measured: no raw git message.
    assert "A/B base: no-such-ref is not a commit in this clone" in done.stderr
    assert "git rev-parse" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_base_that_cannot_be_measured_leaves_the_head_as_new_not_an_error():
    head, base = paired(drifting(), drifting())
    broken = base.model_copy(
        update={
            "status": "error",
            "error": "incorrect: 3 of 9 elements",
            "pallas": None,
            "native": None,
            "tflops": None,
            "speedup": None,
            "metrics": None,
        }
    )
    (verdict,) = judge_pairs([(head, broken)], T)
    assert verdict.verdict == "new"
    assert "the base could not be measured: incorrect" in verdict.reason


def _failed(result, why: str):
    return result.model_copy(
        update={
            "status": "error",
            "error": why,
            "pallas": None,
            "native": None,
            "tflops": None,
            "speedup": None,
            "metrics": None,
        }
    )


def test_a_case_failing_at_the_merge_base_too_is_inherited_not_this_prs_error():
    head, base = paired(drifting(), drifting())
    both = judge_pairs(
        [(_failed(head, "incorrect: 3 of 9"), _failed(base, "incorrect: 2 of 9"))], T
    )
    assert [v.verdict for v in both] == ["inherited"]
    assert both[0].reason == "incorrect: 3 of 9; at the merge base: incorrect: 2 of 9"
    same = _failed(base, "incorrect: 3 of 9")
    (verdict,) = judge_pairs([(_failed(head, "incorrect: 3 of 9"), same)], T)
    assert verdict.reason == "incorrect: 3 of 9 (the same at the merge base)"
    # The base never ran on its own (its pair's worker died): whose fault is not known.
    unknown = _failed(base, "not measured: the pair's worker failed: timed out after 60 s")
    (verdict,) = judge_pairs([(_failed(head, "timed out after 60 s"), unknown)], T)
    assert verdict.verdict == "error"
    # The head broke a case the base passes: this PR's error.
    (verdict,) = judge_pairs([(_failed(head, "incorrect: 3 of 9"), base)], T)
    assert verdict.verdict == "error"


def test_a_run_whose_every_case_is_inherited_passes_by_default_never_an_error():
    """Issue 54 D5: every case failing at the merge base too read '💥 error', exit 3."""
    from ci_bench.judge.ab import ab_report
    from ci_bench.schema import FailPolicy
    from tests.harness.factories import results

    head, base = paired(drifting(), drifting())
    heads = results([_failed(head, "incorrect: 3 of 9")])
    bases = [_failed(base, "incorrect: 2 of 9")]
    report = ab_report(heads, bases, "merge base 1a2b3c4d5e6f", T, FailPolicy())
    assert [c.verdict for c in report.cases] == ["inherited"]
    assert (report.verdict, report.exit_code) == ("inherited", ExitCode.OK)
    strict = ab_report(heads, bases, "merge base 1a2b3c4d5e6f", T, FailPolicy(inherited=True))
    assert strict.exit_code == ExitCode.FAILED
