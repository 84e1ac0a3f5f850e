"""pytest integration: the specification's ``test_no_regression`` (section 4.3) in a few lines.

    from ci_bench.testing import accelerator, assert_no_regression

    @accelerator
    def test_no_regression():
        assert_no_regression("kernels.matmul", "matmul/B1-M1024-K1024-N1024/bfloat16")

Tests marked ``accelerator`` are skipped, visibly, where jax's backend is the CPU, unless
pytest runs with ``--run-accelerator`` (the ci_bench pytest plugin adds both).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from ci_bench.contract.matrix import find_case
from ci_bench.contract.spec import KernelSpec
from ci_bench.errors import ExitCode
from ci_bench.judge.compare import outcome_of
from ci_bench.outcome import exit_code
from ci_bench.pipeline.config import Config, load_config, resolve
from ci_bench.pipeline.request import build_request
from ci_bench.schema import BaselineFile, CaseVerdict, Thresholds
from ci_bench.store.baselines import find_baseline, load_baseline

accelerator = pytest.mark.accelerator


def _spec(kernel: KernelSpec | str) -> KernelSpec:
    if isinstance(kernel, KernelSpec):
        return kernel
    from ci_bench.contract.registry import load_kernels

    return next(iter(load_kernels([kernel]).values()))


def assert_no_regression(
    kernel: KernelSpec | str,
    case_id: str,
    *,
    baseline: str | Path | None = None,
    thresholds: Thresholds | None = None,
    warmup: int | None = None,
    repeats: int | None = None,
) -> CaseVerdict:
    """Measure one case here and fail the test if it regressed against its stored baseline.

    A one-case run of the pipeline: the config's settings (warmup, repeats, timer,
    thresholds, unless given here), the same measuring session, the same judge (toolchain,
    timer and device rules) and the same exit-code rule as CI. ``baseline`` defaults to the
    config's store (nearest version at or below the kernel's). No baseline for this device
    skips the test, with the reason, rather than passing it.
    """
    from ci_bench.measure.devices import fingerprint
    from ci_bench.pipeline.context import Ports
    from ci_bench.pipeline.measuring import in_process_runs
    from ci_bench.pipeline.plan import Gate, plan_for
    from ci_bench.pipeline.run import judged

    spec = _spec(kernel)
    case = find_case(spec, case_id)
    config = load_config(None, Path.cwd())
    if thresholds is not None:
        config = config.model_copy(update={"thresholds": thresholds})
    stored = _stored(spec, config, baseline)
    device = fingerprint()
    entry = stored.entry_for(device)
    if entry is None:
        pytest.skip(f"{stored.kernel} v{stored.version}: no baseline for {device.identity}")
    if not any(c.id == case_id for c in entry.cases):
        pytest.skip(f"{case_id} is not in the {stored.kernel} v{stored.version} baseline")
    flags = {
        "kernel": [spec.name],
        "case": [case_id],
        "warmup": warmup,
        "repeats": repeats,
        "baseline": [Path(baseline)] if baseline is not None else [],
        "quiet": True,
        "mode": "baseline",
    }
    request = build_request(flags, config)
    # A one-case plan: the pipeline's measuring session, judge and exit-code rule, in this
    # process (pytest holds the accelerator), publishing nothing.
    plan = plan_for("all", None, Gate(), mode="baseline", comment=False, publish=False)
    report = judged(
        plan,
        request,
        os.environ,
        Ports(open_runs=in_process_runs, in_process=True),
        save_to=None,
        specs={spec.name: spec},
        cases=[case],
    )
    verdict = next(v for v in report.cases if v.id == case_id)
    current = verdict.current
    if current is None or current.status != "ok":
        raise AssertionError(f"{case_id}: {verdict.reason}")
    if verdict.verdict in ("incomparable", "new"):
        pytest.skip(f"{case_id}: {verdict.reason}")
    if exit_code(outcome_of(report.cases, report.policy, report.run_states)) != ExitCode.OK:
        base = verdict.baseline.pallas if verdict.baseline else None
        assert current.pallas is not None
        was = f"{base.mean_ms:.3f}ms" if base else "?"
        raise AssertionError(
            f"Performance regression: {current.pallas.mean_ms:.3f}ms vs baseline {was} "
            f"({verdict.reason})"
        )
    if verdict.verdict == "noisy":
        warnings.warn(f"{case_id}: {verdict.reason}", stacklevel=2)
    return verdict


def _stored(spec: KernelSpec, config: Config, baseline: str | Path | None) -> BaselineFile:
    if baseline is not None:
        return load_baseline(Path(baseline), spec.name)
    found = find_baseline(resolve(config, config.baselines_dir), spec.name, spec.version)
    if found.baseline is None:
        pytest.skip(f"{spec.name}: {found.note}")
    return found.baseline
