"""Run a list of cases into a Results document, saving after every case so nothing is lost."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from ci_bench.commands.progress import Progress
from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.errors import ExitCode
from ci_bench.measure.harness import Clock, HarnessSettings, PeakLookup, run_case
from ci_bench.measure.roofline import peak_for
from ci_bench.schema import CaseResult, DeviceFingerprint, Results, RunMeta

Now = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def peak_lookup(
    device: DeviceFingerprint, peak_tflops: float | None, peak_gbps: float | None
) -> PeakLookup:
    """dtype -> (peak TFLOPS, peak GB/s): command-line overrides first, then the peak table."""
    table = peak_for(device.device_kind) if device.platform != "cpu" else None

    def lookup(dtype: str) -> tuple[float | None, float | None]:
        tflops = peak_tflops or (table.tflops.get(dtype) if table else None)
        gbps = peak_gbps or (table.hbm_gbps if table else None)
        return tflops, gbps

    return lookup


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
    now: Now = utc_now,
) -> Results:
    """Measure every case; ``save`` receives the growing document after each one.

    An interrupt (Ctrl-C, a cancelled CI job) stops the loop, but what was measured is
    already saved with ``complete: false``.
    """
    done: list[CaseResult] = []
    for index, case in enumerate(cases, start=1):
        progress.start(index, len(cases), case)
        result = run_case(specs[case.kernel], case, settings, peaks, clock)
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
