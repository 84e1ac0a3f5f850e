"""A generated history: a few dozen commits, two kernel versions, one injected step change.

Built through the real path (results -> ``record_from_results``), with seeded noise, so
tests of the store, change-point detection, the CLI and the browser share one story:

- commits 0..17 are matmul v0.1.0, commits 18.. are v0.2.0 (a version boundary);
- at the boundary ``M128 float32`` gets 30 % faster (v0.2.0's new tiling);
- at ``STEP_AT`` (inside v0.2.0) ``M1024 bfloat16`` gets 25 % slower, and the pipeline
  flagged that commit as a regression;
- at ``FALSE_ALARM_AT`` (a documentation-only commit: nothing moves) the pipeline flagged
  ``M128 bfloat16`` as a regression too: a false alarm the history does not confirm.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ci_bench.measure.roofline import compute_metrics
from ci_bench.schema import DeviceFingerprint
from ci_bench.schema.history import HistoryRecord
from ci_bench.store.history import record_from_results
from tests.harness.factories import V5E, case, results

COMMITS = 36
BOUNDARY = 18
STEP_AT = 26
STEP_CASE = "matmul/B1-M1024-K1024-N1024/bfloat16"
FASTER_CASE = "matmul/B1-M128-K128-N128/float32"
FALSE_ALARM_AT = 10
FALSE_ALARM_CASE = "matmul/B1-M128-K128-N128/bfloat16"
CASES = {
    "matmul/B1-M128-K128-N128/float32": 0.050,
    "matmul/B1-M128-K128-N128/bfloat16": 0.040,
    "matmul/B1-M1024-K1024-N1024/float32": 2.0,
    STEP_CASE: 1.2,
}
PEAK_TFLOPS, PEAK_GBPS = 197.0, 819.0


def sha(i: int) -> str:
    return hashlib.sha1(f"commit {i}".encode()).hexdigest()


@dataclass(frozen=True)
class Story:
    records: list[HistoryRecord]
    step_commit: str
    boundary_commit: str


def _case(cid: str, mean_ms: float, version: str):
    c = case(cid, mean_ms, version=version, spread=0.02)
    flops = 2 * c.params["M"] * c.params["K"] * c.params["N"]
    width = 2 if c.dtype == "bfloat16" else 4
    moved = (c.params["M"] * c.params["K"] + c.params["K"] * c.params["N"]) * width
    metrics = compute_metrics(
        flops=flops,
        bytes_accessed=moved + c.params["M"] * c.params["N"] * width,
        mean_ms=c.pallas.mean_ms,
        peak_tflops=PEAK_TFLOPS,
        peak_gbps=PEAK_GBPS,
    )
    return c.model_copy(update={"metrics": metrics})


def story(commits: int = COMMITS, seed: int = 7, device: DeviceFingerprint = V5E) -> Story:
    """The generated history, oldest first (on a CPU ``device``: interpreted runs)."""
    rng = random.Random(seed)
    start = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)
    records = []
    for i in range(commits):
        version = "0.1.0" if i < BOUNDARY else "0.2.0"
        cases = []
        for cid, level in CASES.items():
            if cid == FASTER_CASE and i >= BOUNDARY:
                level *= 0.70
            if cid == STEP_CASE and i >= STEP_AT:
                level *= 1.25
            cases.append(_case(cid, level * (1 + rng.gauss(0, 0.015)), version))
        run = results(cases, device=device, commit=sha(i), profile="ci")
        meta = run.meta.model_copy(update={"started_at": start + timedelta(hours=6 * i)})
        run = run.model_copy(update={"meta": meta})
        verdicts = {STEP_CASE: "regression"} if i == STEP_AT else {}
        if i == FALSE_ALARM_AT:
            verdicts = {FALSE_ALARM_CASE: "regression"}
        records.append(
            record_from_results(run, verdicts=verdicts, pr=100 + i if i % 3 == 0 else None)
        )
    return Story(records, sha(STEP_AT), sha(BOUNDARY))
