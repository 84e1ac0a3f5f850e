from __future__ import annotations

import dataclasses
import itertools

import jax.numpy as jnp
import pytest

from ci_bench.contract.spec import Case, Tolerance
from ci_bench.measure.harness import (
    HarnessSettings,
    benchmark_single,
    check_outputs,
    run_case,
    stats_of,
    time_interleaved,
)
from kernels.matmul import SPEC


class StepClock:
    """A clock that advances by the next duration on every second call (start, stop)."""

    def __init__(self, durations):
        self.durations = iter(durations)
        self.now = 0.0
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
        if self.calls % 2 == 0:
            self.now += next(self.durations)
        return self.now


def test_benchmark_single_matches_the_specification_formulae():
    clock = StepClock([0.001, 0.002, 0.003, 0.006])
    calls = []
    stats = benchmark_single(lambda x: calls.append(x) or x, 1, warmup=2, repeats=4, clock=clock)
    assert len(calls) == 6  # warmup calls are made but not timed
    assert stats["mean_ms"] == pytest.approx(3.0)
    assert stats["min_ms"] == pytest.approx(1.0)
    assert stats["max_ms"] == pytest.approx(6.0)
    # population std of 1, 2, 3, 6 ms
    assert stats["std_ms"] == pytest.approx(((4 + 1 + 0 + 9) / 4) ** 0.5)


def test_stats_keep_raw_samples_median_and_population_std():
    stats = stats_of([0.001, 0.002, 0.003, 0.006], warmup=5)
    assert stats.samples_ms == pytest.approx([1, 2, 3, 6])
    assert stats.median_ms == pytest.approx(2.5)
    assert stats.std_ms == pytest.approx(((4 + 1 + 0 + 9) / 4) ** 0.5)
    assert stats.repeats == 4
    assert stats.warmup == 5


def test_interleaved_rounds_alternate_order_and_never_time_warmup():
    order = []

    def make(name):
        return lambda: order.append(name)

    samples = time_interleaved(
        [make("a"), make("b")], [], warmup=1, repeats=4, clock=itertools.count().__next__
    )
    assert order == ["a", "b", "a", "b", "b", "a", "a", "b", "b", "a"]
    assert [len(s) for s in samples] == [4, 4]


def test_check_outputs_counts_mismatches_and_nan():
    ref = jnp.array([1.0, 2.0, 3.0, 0.0])
    good = check_outputs(ref + 1e-4, ref, Tolerance(atol=1e-3, rtol=0))
    assert good.ok
    assert good.max_abs_err == pytest.approx(1e-4, rel=1e-2)
    bad = check_outputs(ref.at[1].set(2.5), ref, Tolerance(atol=1e-3, rtol=1e-3))
    assert not bad.ok
    assert bad.mismatched == 1
    assert bad.max_rel_err == pytest.approx(0.25)
    nan = check_outputs(ref.at[0].set(jnp.nan), ref, Tolerance(atol=1.0, rtol=1.0))
    assert not nan.ok
    assert nan.mismatched == 1
    assert nan.max_abs_err is None


def test_check_outputs_rejects_shape_mismatch():
    with pytest.raises(ValueError, match="shape"):
        check_outputs(jnp.ones(3), jnp.ones(4), Tolerance(0, 0))


def no_peaks(dtype):
    return None, None


SETTINGS = HarnessSettings(warmup=1, repeats=3)
UNALIGNED = Case("matmul", {"B": 1, "M": 127, "K": 513, "N": 255}, "float32")


def test_ok_case_reports_spec_keys_and_tflops_formula():
    result = run_case(SPEC, UNALIGNED, SETTINGS, no_peaks)
    assert result.status == "ok", result.error
    assert result.correctness.ok
    assert result.pallas.repeats == 3
    assert result.native.repeats == 3
    assert result.tflops == pytest.approx(
        2 * 127 * 513 * 255 / (result.pallas.mean_ms / 1e3) / 1e12
    )
    assert result.speedup == pytest.approx(result.native.mean_ms / result.pallas.mean_ms)
    assert result.compile.pallas_ms > 0
    assert result.compile.native_ms > 0
    assert result.metrics.mfu is None  # CPU: no peak, no invented MFU
    assert result.shape == [1, 127, 513, 255]


def test_wrong_output_is_an_error_never_a_speedup():
    wrong = dataclasses.replace(SPEC, pallas=lambda a, b: jnp.matmul(a, b) * 1.1)
    result = run_case(wrong, UNALIGNED, SETTINGS, no_peaks)
    assert result.status == "error"
    assert result.error.startswith("incorrect:")
    assert result.speedup is None
    assert result.tflops is None
    assert not result.correctness.ok
    assert result.correctness.max_abs_err > 0.01


def test_exception_is_recorded_as_an_error():
    def broken(a, b):
        raise MemoryError("RESOURCE_EXHAUSTED: out of memory allocating 9 GiB")

    result = run_case(dataclasses.replace(SPEC, pallas=broken), UNALIGNED, SETTINGS, no_peaks)
    assert result.status == "error"
    assert result.error == "MemoryError: RESOURCE_EXHAUSTED: out of memory allocating 9 GiB"


class FakeClock:
    """A clock that moves only when a timed function 'runs' for its next duration."""

    def __init__(self, durations):
        self.durations = iter(durations)
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def work(self) -> None:
        self.now += next(self.durations)


def test_adaptive_sampling_stops_once_the_median_is_precise():
    from ci_bench.measure.settings import Adaptive

    clock = FakeClock(itertools.repeat(0.001))
    samples = time_interleaved(
        [clock.work, clock.work],
        [],
        warmup=0,
        repeats=10,
        clock=clock,
        adaptive=Adaptive(target=0.01, max_seconds=60),
    )
    assert [len(s) for s in samples] == [10, 10]  # constant timings: precise at the minimum


def test_adaptive_sampling_keeps_going_on_noise_until_the_time_cap():
    import random

    from ci_bench.measure.settings import Adaptive

    rng = random.Random(0)
    clock = FakeClock(rng.uniform(0.001, 0.003) for _ in range(100_000))
    (samples,) = time_interleaved(
        [clock.work],
        [],
        warmup=0,
        repeats=10,
        clock=clock,
        adaptive=Adaptive(target=0.001, max_seconds=1.0),
    )
    assert len(samples) > 100  # far beyond the minimum
    assert sum(samples) == pytest.approx(1.0, abs=0.05)  # stopped at the cap


def test_adaptive_sampling_reaches_a_reachable_target():
    import random

    from ci_bench.judge.stats import relative_ci_width
    from ci_bench.measure.settings import Adaptive

    rng = random.Random(1)
    clock = FakeClock(rng.gauss(0.002, 0.0002) for _ in range(100_000))
    (samples,) = time_interleaved(
        [clock.work],
        [],
        warmup=0,
        repeats=10,
        clock=clock,
        adaptive=Adaptive(target=0.02, max_seconds=1000),
    )
    assert relative_ci_width(samples) <= 0.02
    assert 10 < len(samples) < 2000
