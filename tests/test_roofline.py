from __future__ import annotations

import pytest

from ci_bench.measure.roofline import PEAKS, compute_metrics, peak_for, tflops_of


@pytest.mark.parametrize(
    ("kind", "cores", "tflops", "gbps"),
    [
        # jax's per-TensorCore table times the TensorCores of one device (v4, v5p: 2).
        ("TPU v4", 2, 275.0, 1230.0),
        ("TPU v5 lite", 1, 197.0, 820.0),
        ("TPU v5e", 1, 197.0, 820.0),
        ("TPU v5", 2, 459.0, 2460.0),
        ("TPU v5p", 2, 459.0, 2460.0),
        ("TPU v6 lite", 1, 920.0, 1640.0),
        # jax's table as it comes (issue 29): v4i, 7 and 8i too.
        ("TPU v4 lite", 1, 137.0, 614.0),
        ("TPU7", 1, 1155.0, 3700.0),
        ("TPU8i", 1, 550.5, 4300.0),
    ],
)
def test_tpu_peaks_are_jaxs_per_core_figures_times_the_cores(kind, cores, tflops, gbps):
    from jax._src.pallas.mosaic.tpu_info import (
        chip_version_from_device_kind,
        get_tpu_info_for_chip,
    )

    info = get_tpu_info_for_chip(chip_version_from_device_kind(kind), cores)
    peak = peak_for(kind)
    assert peak is not None
    assert peak.tflops["bfloat16"] == pytest.approx(info.bf16_ops_per_second * cores / 1e12)
    assert peak.hbm_gbps == pytest.approx(info.mem_bw_bytes_per_second * cores / 1e9)
    # The published chip figures, as jax's table has them (to its rounding).
    assert peak.tflops["bfloat16"] == pytest.approx(tflops, rel=1e-2)
    assert peak.hbm_gbps == pytest.approx(gbps, rel=1e-2)
    assert "float32" not in peak.tflops  # no published float32 MXU peak on TPU


@pytest.mark.parametrize(
    ("kind", "key"),
    [
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
