"""Run a list of cases into a Results document, saving after every case so nothing is lost."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.errors import InputError
from ci_bench.measure.harness import Clock, HarnessSettings, PeakLookup, run_case
from ci_bench.measure.progress import Progress
from ci_bench.measure.settings import Adaptive
from ci_bench.schema import CaseResult, Results, RunMeta
from ci_bench.schema.withheld import WithheldModel

Now = Callable[[], datetime]


# Measures the given cases, calling started(i) and done(i, result) as each begins and ends.
Execute = Callable[[Sequence[Case], Callable[[int], None], Callable[[int, CaseResult], None]], None]


def in_process(
    specs: Mapping[str, KernelSpec],
    settings: HarnessSettings,
    peaks: PeakLookup,
    clock: Clock = time.perf_counter,
) -> Execute:
    """Cases measured one after another in this process (library use and unit tests)."""

    def execute(
        cases: Sequence[Case],
        started: Callable[[int], None],
        done: Callable[[int, CaseResult], None],
    ) -> None:
        for i, case in enumerate(cases):
            started(i)
            done(i, measure_case(specs[case.kernel], case, settings, peaks, clock))

    return execute


def measure_case(
    spec: KernelSpec,
    case: Case,
    settings: HarnessSettings,
    peaks: PeakLookup,
    clock: Clock = time.perf_counter,
) -> CaseResult:
    """One case, where it is measured: the lowering check first when asked (run --lower),
    whose failure is the case's error; then the harness; then the cost model, read from
    the traced grid after the timing (it never fails the case: a model failure is
    recorded as "not modelled: why")."""
    _kernel_interpret(settings, case.kernel)
    if settings.lower:
        from ci_bench.measure.lowering import as_case_error, check_platform, lower_case

        platform = check_platform(settings.lower)
        failed = as_case_error(lower_case(spec, case, platform, settings.seed))
        if failed is not None:
            return with_model(failed, spec, case, settings)
    return with_model(run_case(spec, case, settings, peaks, clock), spec, case, settings)


def measure_pair(
    head: KernelSpec,
    base: KernelSpec,
    case: Case,
    settings: HarnessSettings,
    peaks: PeakLookup,
    order_seed: str,
) -> list[CaseResult]:
    """A/B: the head's and the base's kernels of one case, round by round on the same
    inputs (order shuffled from ``order_seed``), each with its cost model. A base that
    fails leaves the head measured alone (the pair's verdict is then ``new``); a head that
    fails leaves the base measured alone, so a failure the merge base shares is told from
    one this pull request caused."""
    import random

    from ci_bench.measure.harness import run_contestants
    from ci_bench.schema import NOT_MEASURED

    _kernel_interpret(settings, case.kernel)

    pair = run_contestants([head, base], case, settings, peaks, rng=random.Random(order_seed))
    if pair[0].status != "ok" and pair[1].status != "ok":
        if (pair[0].error or "").startswith(NOT_MEASURED):  # the base failed: the head alone
            pair[0] = run_case(head, case, settings, peaks)
        else:  # the head failed: does the base fail too, on its own? (then not this PR's)
            pair[1] = run_case(base, case, settings, peaks)
    return [with_model(pair[0], head, case, settings), with_model(pair[1], base, case, settings)]


def model_chips() -> list[str]:
    """The chips a run models each case on: every TPU chip the model knows, and on a GPU
    runner its GPU too (the floor guard reads it). Asks jax for the host's accelerator: call
    it in a worker, never in the orchestrating process."""
    from ci_bench.measure.model.chips import CHIP_NAMES
    from ci_bench.measure.model.targets import host_target

    here = host_target()
    return [*CHIP_NAMES, *([here] if here and here not in CHIP_NAMES else [])]


def with_model(
    result: CaseResult, spec: KernelSpec, case: Case, settings: HarnessSettings
) -> CaseResult:
    """``result`` with the case's cost model on every chip the model knows (the judge picks
    the target chips). Call it after timing, where the case's kernel module is loaded."""
    from ci_bench.measure.model import analyze_case

    model = analyze_case(
        spec, case, model_chips(), seed=settings.seed, flops_factor=settings.cost_model_factor
    )
    # Validated as the file holds it: a partial case's times withheld (issue 39).
    return result.model_copy(update={"model": WithheldModel.model_validate(model.model_dump())})


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
    execute: Execute | None = None,
    previous: Sequence[CaseResult] = (),
) -> Results:
    """Measure every case not already in ``previous``; ``save`` receives the growing
    document (cases in selection order, whatever order they finish in) after each one.

    An interrupt (Ctrl-C, a cancelled CI job) stops the loop, but what was measured is
    already saved with ``complete: false``. ``precheck`` (e.g. the lowering check of
    ``run --lower``) may answer for a case with an error result instead of measuring it.
    """
    execute = execute or in_process(specs, settings, peaks, clock)
    kept = {c.id: c for c in previous}
    found: dict[str, CaseResult] = {c.id: kept[c.id] for c in cases if c.id in kept}
    todo = [c for c in cases if c.id not in found]
    order = {c.id: i for i, c in enumerate(cases)}

    def in_order() -> list[CaseResult]:
        return sorted(found.values(), key=lambda r: order[r.id])

    def started(i: int) -> None:
        progress.start(i + 1, len(todo), todo[i])

    def done(i: int, result: CaseResult) -> None:
        found[result.id] = result
        progress.done(i + 1, len(todo), result)
        save(Results(meta=meta, cases=in_order()))

    execute(todo, started, done)
    final_meta = meta.model_copy(update={"finished_at": now(), "complete": True})
    results = Results(meta=final_meta, cases=in_order())
    save(results)
    return results


def resumable(previous: Results, meta: RunMeta) -> str | None:
    """Why ``previous`` cannot be resumed by a run with ``meta`` (None: it can)."""
    old, new = previous.meta, meta
    if not old.settings.comparable(new.settings):
        diff = [
            f"{k} {v!r} (now {new.settings.model_dump()[k]!r})"
            for k, v in old.settings.model_dump(exclude={"compilation_cache"}).items()
            if new.settings.model_dump()[k] != v
        ]
        return f"measured with other settings: {', '.join(diff)}"
    if old.device.identity != new.device.identity or old.device.software != new.device.software:
        return (
            f"measured on {old.device.identity} with {old.device.software}, "
            f"this run is on {new.device.identity} with {new.device.software}"
        )
    for field in ("profile", "shard", "case_globs", "adhoc"):
        if getattr(old, field) != getattr(new, field):
            was, now = getattr(old, field), getattr(new, field)
            return f"another selection: {field} {was!r}, now {now!r}"
    return None


def kept_cases(previous: Results, specs: Mapping[str, KernelSpec]) -> list[CaseResult]:
    """The cases a resumed run need not measure again: ok, and of the same kernel version.
    Errors are retried (a transient failure should not stick)."""
    return [
        c
        for c in previous.cases
        if c.status == "ok" and c.kernel in specs and specs[c.kernel].version == c.version
    ]


def configure_jax(cache_dir: Path | None, interpret_mode: str | None = "kernel") -> str | None:
    """Persistent compilation cache: later runs (and restarted workers) load compiled
    kernels instead of recompiling. Also the CPU interpret mode (which starts jax's
    backend: ``None`` skips it in a parent that must not hold the accelerator); returns
    the mode in force (None off CPU or when skipped)."""
    import jax

    from ci_bench.measure.interpret import apply_interpret_mode

    mode = None
    if interpret_mode is not None:
        mode = apply_interpret_mode("tpu" if interpret_mode == "tpu" else "kernel")

    if cache_dir is not None:
        try:
            cache_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(
                f"compilation cache {cache_dir}: cannot create the folder: {exc.strerror}"
            ) from None
        jax.config.update("jax_compilation_cache_dir", str(cache_dir))
        # Interpret-mode kernels compile in well under the 1 s default threshold.
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return mode


def harness_settings_from(raw: Mapping[str, Any]) -> HarnessSettings:
    """HarnessSettings back from ``dataclasses.asdict`` (how workers receive them)."""
    adaptive = raw.get("adaptive")
    modes = tuple((str(k), str(m)) for k, m in raw.get("kernel_interpret") or ())
    return HarnessSettings(
        **{**raw, "adaptive": Adaptive(**adaptive) if adaptive else None, "kernel_interpret": modes}
    )


def _kernel_interpret(settings: HarnessSettings, kernel: str) -> None:
    """A kernel's own CPU interpret mode (config cpu-interpret-tpu, its SPEC), set before
    its case; nothing to do when every kernel runs in the run's mode."""
    if settings.kernel_interpret:
        from ci_bench.measure.interpret import apply_interpret_mode

        apply_interpret_mode("tpu" if settings.interpret_for(kernel) == "tpu" else "kernel")
