"""A pull-request report with everything a comment can hold, built through the real judges.

Two kernels (matmul with forward and backward cases, gla), the longest ids the project's
kernels produce, paired A/B samples with real spread (intervals are not degenerate), and:
a confirmed regression in both modes, an improvement, an A/B that cannot tell (noisy), a
structural model change, a memory regression, established drift, a baseline excess that
is not (information), an error and a few passes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from ci_bench.judge.ab import ab_report
from ci_bench.judge.compare import compare
from ci_bench.judge.pr import pr_report, rebuild
from ci_bench.judge.stats import stats_of
from ci_bench.schema import CaseResult, FailPolicy, ModelChange, Report, Thresholds
from ci_bench.store.baselines import BaselineFile, Lookup, entry_from_results
from tests.harness.factories import case, results

T = Thresholds()
HEAD = "3f9c2d81e4b7a6055d1c9e2f7a8b6c4d3e2f1a0b"
BASE = "0564a1b2c3d4e5f60718293a4b5c6d7e8f901234"
RUN = "https://github.com/octo-org/kernels/actions/runs/123456789"

REG = "matmul/B1-M1024-K1024-N1024/bfloat16"
FAST = "matmul/B4-M128-K256-N128/float32"
UNSURE = "matmul/B1-M127-K513-N255/float32"
BROKEN = "matmul/B1-M127-K513-N255/bfloat16"
GROWN = "matmul/B1-M128-K128-N128/float32"
DRIFT = "gla/B1-T256-H2-K64-V64/bfloat16"
INFO = "gla/B1-T256-H2-K64-V64/float32"
PLAIN = "gla/B2-T128-H1-K128-V128/bfloat16"
STRUCTURAL = "gla/B2-T128-H1-K128-V128/float32"

# Per-round factors: paired ratios that scatter like a loaded runner's.
_JITTER = (1.0, 1.02, 0.99, 1.01, 0.985, 1.015, 0.995, 1.005, 0.98, 1.02)
_WIDE = (0.8, 1.45, 0.95, 1.3, 1.1)


def _jittered(result: CaseResult, pattern=_JITTER) -> CaseResult:
    assert result.pallas is not None
    samples = [
        ms / 1e3 * pattern[i % len(pattern)] for i, ms in enumerate(result.pallas.samples_ms)
    ]
    return result.model_copy(update={"pallas": stats_of(samples, warmup=5)})


def _backward(result: CaseResult) -> CaseResult:
    data = result.model_dump(mode="json")
    data.update(id=f"{result.id}/backward", mode="backward")
    return CaseResult.model_validate(data)


def _lookups(stored) -> dict[str, Lookup]:
    when = datetime(2026, 11, 2, tzinfo=UTC)
    out = {}
    for kernel in ("matmul", "gla"):
        entry = entry_from_results(stored, kernel, when, "v0.1.0")
        doc = BaselineFile(kernel=kernel, version="0.1.0", entries=[entry])
        out[kernel] = Lookup(kernel, "0.1.0", Path(f"baselines/{kernel}_v0.1.0.json"), doc, None)
    return out


def rich_pr_report() -> Report:
    """The PR verdict (mode ``pr``) of a head against its merge base and the baseline."""
    levels = {  # stored, shard's head, A/B head, A/B base (ms)
        REG: (1.0, 1.25, 1.25, 1.0),
        FAST: (3.0, 2.4, 2.4, 3.0),
        UNSURE: (1.0, 1.0, 1.0, 1.0),
        GROWN: (1.0, 1.01, 1.0, 1.0),
        DRIFT: (2.0, 2.6, 2.6, 2.6),
        INFO: (2.0, 2.16, 2.0, 2.0),
        PLAIN: (2.0, 2.0, 2.0, 2.0),
        STRUCTURAL: (2.0, 2.0, 2.0, 2.0),
    }
    kernels = {"matmul": "0.1.0", "gla": "0.1.0"}
    stored, shard, heads, bases = [], [], [], []
    for cid, (s, h, ah, ab) in levels.items():
        grown = {"peak_bytes": 1_500_000 if cid == GROWN else 1_000_000}
        stored.append(case(cid, s, peak_bytes=1_000_000))
        shard.append(_jittered(case(cid, h, **grown)))
        heads.append(_jittered(case(cid, ah, **grown), _WIDE if cid == UNSURE else _JITTER))
        base_pattern = (1.0,) if cid == UNSURE else _JITTER[3:] + _JITTER[:3]
        bases.append(_jittered(case(cid, ab, peak_bytes=1_000_000), base_pattern))
    for collection in (stored, shard, heads, bases):
        collection.append(_backward(collection[0]))  # REG, backward too
    shard.append(case(BROKEN, status="error"))
    stored.append(case(BROKEN, 1.0))
    # The regression was re-measured (the confirmation pass), head and base alike.
    heads = [
        h.model_copy(update={"confirmation": h.pallas}) if h.id.startswith(REG) else h
        for h in heads
    ]
    bases = [
        b.model_copy(update={"confirmation": b.pallas}) if b.id.startswith(REG) else b
        for b in bases
    ]
    commit = {"commit": HEAD, "kernels": kernels}
    baseline = compare(
        results(shard, **commit), _lookups(results(stored, kernels=kernels)), T, FailPolicy()
    )
    ab = ab_report(results(heads, **commit), bases, f"main ({BASE})", T, FailPolicy())
    pr = pr_report(baseline, ab, FailPolicy())
    model = ModelChange(
        verdict="structural",
        reason="modelled time on v5e +38% (HBM bytes +2.0 MiB: args[1] re-read 8x, was 4x; "
        "grid steps 64 -> 128)",
        chip="v5e",
        time_change=0.38,
        hbm_bytes=2 * 1024 * 1024,
        grid_steps=64,
    )
    cases = [v.model_copy(update={"model": model}) if v.id == STRUCTURAL else v for v in pr.cases]
    pr = rebuild(pr, cases=cases)
    return pr.model_copy(update={"head_sha": HEAD, "run_url": RUN})
