"""Run a list of cases into a Results document, saving after every case so nothing is lost."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.errors import ExitCode
from ci_bench.measure.harness import Clock, HarnessSettings, PeakLookup, run_case
from ci_bench.measure.progress import Progress
from ci_bench.schema import CaseResult, Results, RunMeta

Now = Callable[[], datetime]


def run_all(
    specs: Mapping[str, KernelSpec],
    cases: Sequence[Case],
    settings: HarnessSettings,
    meta: RunMeta,
    peaks: PeakLookup,
    *,
    progress: Progress,
    save: Callable[[Results], None],
    clock: Clock = time.perf_counter,
    now: Now,
    precheck: Callable[[KernelSpec, Case], CaseResult | None] | None = None,
) -> Results:
    """Measure every case; ``save`` receives the growing document after each one.

    An interrupt (Ctrl-C, a cancelled CI job) stops the loop, but what was measured is
    already saved with ``complete: false``. ``precheck`` (e.g. the lowering check of
    ``run --lower``) may answer for a case with an error result instead of measuring it.
    """
    done: list[CaseResult] = []
    for index, case in enumerate(cases, start=1):
        progress.start(index, len(cases), case)
        spec = specs[case.kernel]
        result = precheck(spec, case) if precheck else None
        result = result or run_case(spec, case, settings, peaks, clock)
        done.append(result)
        progress.done(index, len(cases), result)
        save(Results(meta=meta, cases=list(done)))
    final_meta = meta.model_copy(update={"finished_at": now(), "complete": True})
    results = Results(meta=final_meta, cases=done)
    save(results)
    return results


def run_exit_code(results: Results, fail_on_error: bool) -> ExitCode:
    """3 when nothing was measured, 1 when a case errored (policy), else 0."""
    ok = sum(c.status == "ok" for c in results.cases)
    if ok == 0:
        return ExitCode.NOTHING_MEASURED
    if fail_on_error and ok < len(results.cases):
        return ExitCode.FAILED
    return ExitCode.OK
