from __future__ import annotations

import pytest

from ci_bench.measure.roofline import PEAKS, compute_metrics, peak_for, tflops_of


@pytest.mark.parametrize(
    ("kind", "key"),
    [
        ("TPU v4", "tpu-v4"),
        ("TPU v5 lite", "tpu-v5e"),
        ("TPU v5e", "tpu-v5e"),
        ("TPU v5", "tpu-v5p"),
        ("TPU v5p", "tpu-v5p"),
        ("TPU v6 lite", "tpu-v6e"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H200", "h200"),
    ],
)
def test_device_kinds_map_to_the_peak_table(kind, key):
    assert peak_for(kind) is PEAKS[key]


def test_cpus_and_unknown_devices_have_no_peak():
    assert peak_for("cpu") is None
    assert peak_for("TPU v99") is None


def test_matmul_example_from_the_specification():
    M = K = N = 1024
    flops = 2 * M * K * N
    nbytes = (M * K + K * N + M * N) * 2
    metrics = compute_metrics(
        flops=flops, bytes_accessed=nbytes, mean_ms=0.1, peak_tflops=197.0, peak_gbps=819.0
    )
    assert metrics.arithmetic_intensity == pytest.approx(flops / nbytes)
    assert metrics.mfu == pytest.approx(tflops_of(flops, 0.1) / 197.0)
    assert metrics.hbm_utilization == pytest.approx(nbytes / 1e-4 / 1e9 / 819.0)
    # AI 341 > ridge 197e12 / 819e9 = 240: compute bound
    assert metrics.bound == "compute"


def test_low_intensity_is_memory_bound_and_unknown_peaks_stay_null():
    low = compute_metrics(flops=10, bytes_accessed=100, mean_ms=1, peak_tflops=1, peak_gbps=1)
    assert low.bound == "memory"
    none = compute_metrics(
        flops=10, bytes_accessed=100, mean_ms=1, peak_tflops=None, peak_gbps=None
    )
    assert none.mfu is None
    assert none.hbm_utilization is None
    assert none.bound is None
    assert none.achieved_gbps == pytest.approx(100 / 1e-3 / 1e9)
