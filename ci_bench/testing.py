"""pytest integration: the specification's ``test_no_regression`` (section 4.3) in a few lines.

    from ci_bench.testing import accelerator, assert_no_regression

    @accelerator
    def test_no_regression():
        assert_no_regression("kernels.matmul", "matmul/B1-M1024-K1024-N1024/bfloat16")

Tests marked ``accelerator`` are skipped, visibly, where jax's backend is the CPU, unless
pytest runs with ``--run-accelerator`` (the ci_bench pytest plugin adds both).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from ci_bench.commands.config import load_config, resolve
from ci_bench.contract.matrix import find_case
from ci_bench.contract.spec import KernelSpec
from ci_bench.judge.compare import judge
from ci_bench.schema import CaseVerdict, Thresholds
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
    warmup: int = 5,
    repeats: int = 20,
) -> CaseVerdict:
    """Measure one case here and fail the test if it regressed against its stored baseline.

    ``baseline`` defaults to the config's store (nearest version at or below the kernel's).
    No baseline for this device skips the test, with the reason, rather than passing it.
    """
    from ci_bench.measure.devices import fingerprint
    from ci_bench.measure.harness import run_case
    from ci_bench.measure.roofline import peak_lookup
    from ci_bench.measure.settings import HarnessSettings

    spec = _spec(kernel)
    case = find_case(spec, case_id)
    config = load_config(None, Path.cwd())
    if baseline is None:
        found = find_baseline(resolve(config, config.baselines_dir), spec.name, spec.version)
        if found.baseline is None:
            pytest.skip(f"{spec.name}: {found.note}")
        stored = found.baseline
    else:
        stored = load_baseline(Path(baseline), spec.name)
    device = fingerprint()
    entry = stored.entry_for(device)
    if entry is None:
        pytest.skip(f"{stored.kernel} v{stored.version}: no baseline for {device.identity}")
    reference = next((c for c in entry.cases if c.id == case_id), None)
    if reference is None:
        pytest.skip(f"{case_id} is not in the {stored.kernel} v{stored.version} baseline")
    settings = HarnessSettings(warmup=warmup, repeats=repeats, seed=config.seed)
    current = run_case(spec, case, settings, peak_lookup(device.device_kind, device.platform))
    if current.status != "ok":
        raise AssertionError(f"{case_id}: {current.error}")
    verdict = judge(current, reference, thresholds or config.thresholds)
    assert current.pallas is not None
    assert reference.pallas is not None
    if verdict.verdict == "regression":
        raise AssertionError(
            f"Performance regression: {current.pallas.mean_ms:.3f}ms vs baseline "
            f"{reference.pallas.mean_ms:.3f}ms ({verdict.reason})"
        )
    if verdict.verdict == "noisy":
        warnings.warn(f"{case_id}: {verdict.reason}", stacklevel=2)
    return verdict
