"""Roofline metrics and the accelerator peak table (specification section 1)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ci_bench.schema import Metrics, Results
from ci_bench.schema.gpus import gpu
from ci_bench.schema.platforms import PLATFORMS, PeakSource, platform_of


@dataclass(frozen=True)
class Peak:
    """Peak dense compute per dtype (TFLOPS) and HBM bandwidth (GB/s, 1e9 bytes/s)."""

    tflops: dict[str, float]
    hbm_gbps: float


# TPUs: ONE source of truth, jax's own hardware table, read through
# ``ci_bench.measure.model.chips`` (which states the rule for chips with two TensorCores:
# jax's figures are per TensorCore; a megacore chip, v4 or v5p, is one device of two cores,
# so its peak is twice the per-core figure). jax publishes bf16 (and int8) MXU peaks only:
# float32 dots run as multi-pass bf16, so float32 MFU is null on TPU rather than invented.
#
# GPUs, as published by the vendors (dense figures, no sparsity):
# - NVIDIA A100 SXM4 (datasheet): 312 TFLOPS bf16 tensor, 156 TFLOPS TF32 tensor;
#   HBM2e 2,039 GB/s (80 GB) / 1,555 GB/s (40 GB). A100 PCIe 80 GB: 1,935 GB/s.
# - NVIDIA H100 SXM5, H200 SXM, B200: the GPU table the cost model and the lowering check
#   read (``ci_bench.schema.gpus``, each figure's source there), one source for all three.
#   H100 PCIe: 756 TFLOPS bf16, 378 TF32; 2,000 GB/s.
#   On these GPUs JAX's default precision lets float32 dots use TF32 tensor cores, so the
#   float32 peak is the TF32 figure (the vector FP32 peak would give MFU above 1).


def gpu_peak(name: str) -> Peak:
    """A GPU's peak from the GPU table (``schema.gpus``)."""
    found = gpu(name)
    tf32 = found.tf32_flops_per_s / 1e12
    return Peak(
        {"bfloat16": found.chip_tflops, "float16": found.chip_tflops, "float32": tf32},
        found.chip_gbps,
    )


PEAKS: dict[str, Peak] = {
    "a100-sxm-80gb": Peak({"bfloat16": 312.0, "float16": 312.0, "float32": 156.0}, 2039.0),
    "a100-sxm-40gb": Peak({"bfloat16": 312.0, "float16": 312.0, "float32": 156.0}, 1555.0),
    "a100-pcie-80gb": Peak({"bfloat16": 312.0, "float16": 312.0, "float32": 156.0}, 1935.0),
    "h100-sxm": gpu_peak("h100"),
    "h100-pcie": Peak({"bfloat16": 756.0, "float16": 756.0, "float32": 378.0}, 2000.0),
    "h200": gpu_peak("h200"),
    "b200": gpu_peak("b200"),
}

# GPU device_kind strings as jax reports them, matched in order (first match wins).
_KIND_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), key)
    for pattern, key in (
        (r"A100.*PCIe", "a100-pcie-80gb"),
        (r"A100.*40GB", "a100-sxm-40gb"),
        (r"A100", "a100-sxm-80gb"),
        (r"H100.*PCIe", "h100-pcie"),
        (r"H100", "h100-sxm"),
        (r"H200", "h200"),
        (r"B200", "b200"),
    )
)


def tpu_peak(chip_name: str) -> Peak:
    """A TPU chip's peak (one jax device: all its TensorCores), from jax's table."""
    from ci_bench.measure.model.chips import chip

    found = chip(chip_name)
    return Peak({"bfloat16": found.chip_tflops}, found.chip_gbps)


def _jax_chips(device_kind: str) -> Peak | None:
    if not device_kind.strip().upper().startswith("TPU"):
        return None
    from ci_bench.measure.model.chips import chip_for_device_kind

    name = chip_for_device_kind(device_kind)
    return tpu_peak(name) if name else None


def _vendor_table(device_kind: str) -> Peak | None:
    for pattern, key in _KIND_RULES:
        if pattern.search(device_kind.strip()):
            return PEAKS[key]
    return None


# The platform table's peak sources (``ci_bench.schema.platforms``, ``Platform.peaks``).
PEAK_SOURCES: dict[PeakSource, Callable[[str], Peak | None]] = {
    "jax-chips": _jax_chips,
    "vendor-table": _vendor_table,
}


def peak_for(device_kind: str, platform: str | None = None) -> Peak | None:
    """The peak of a jax ``device_kind`` from its platform's source (any platform's when
    not given); None for CPUs and unknown devices."""
    entries = [platform_of(platform)] if platform is not None else PLATFORMS
    for entry in entries:
        found = PEAK_SOURCES[entry.peaks](device_kind) if entry.peaks else None
        if found is not None:
            return found
    return None


# dtype -> (peak TFLOPS, peak GB/s) of the device; (None, None) when unknown.
PeakLookup = Callable[[str], tuple[float | None, float | None]]


def peak_lookup(
    device_kind: str,
    platform: str,
    peak_tflops: float | None = None,
    peak_gbps: float | None = None,
) -> PeakLookup:
    """dtype -> (peak TFLOPS, peak GB/s): the given overrides first, then the peak table.

    The one place peaks are resolved: measuring (MFU, HBM %) and the roofline chart use it.
    """
    table = peak_for(device_kind, platform)

    def lookup(dtype: str) -> tuple[float | None, float | None]:
        tflops = peak_tflops or (table.tflops.get(dtype) if table else None)
        gbps = peak_gbps or (table.hbm_gbps if table else None)
        return tflops, gbps

    return lookup


def table_peaks(results: Results) -> dict[str, tuple[float | None, float | None]]:
    """The peak table's (TFLOPS, GB/s) for each dtype of a run, on its device: the values
    the roofline chart (``report.plot``, which runs no jax) draws when none were recorded."""
    device = results.meta.device
    lookup = peak_lookup(device.device_kind, device.platform)
    return {dtype: lookup(dtype) for dtype in sorted({c.dtype for c in results.cases})}


def compute_metrics(
    *,
    flops: int,
    bytes_accessed: int,
    mean_ms: float,
    peak_tflops: float | None,
    peak_gbps: float | None,
    compute_unit: str | None = None,
) -> Metrics:
    """MFU, HBM utilisation, arithmetic intensity and the roofline bound of one timing.

    Bound is compute when AI exceeds the ridge point peak_flops / peak_bandwidth; without
    both peaks the bound (and the peak-relative figures) stay null rather than guessed.
    The peak table holds matrix-unit (MXU / tensor core) figures, so MFU is taken only
    for ``compute_unit="matrix"`` kernels (or when the unit is not given); a vector-unit
    kernel's MFU stays null and its headline is HBM utilisation.
    """
    seconds = mean_ms / 1e3
    tflops = tflops_of(flops, mean_ms)
    gbps = bytes_accessed / seconds / 1e9 if seconds > 0 else 0.0
    intensity = flops / bytes_accessed if bytes_accessed > 0 else None
    bound = None
    if peak_tflops and peak_gbps and intensity is not None:
        ridge = (peak_tflops * 1e12) / (peak_gbps * 1e9)
        bound = "compute" if intensity > ridge else "memory"
    return Metrics(
        flops=flops,
        bytes_accessed=bytes_accessed,
        arithmetic_intensity=intensity,
        achieved_gbps=gbps,
        mfu=tflops / peak_tflops if peak_tflops and compute_unit != "vector" else None,
        hbm_utilization=gbps / peak_gbps if peak_gbps else None,
        bound=bound,
        peak_tflops=peak_tflops,
        peak_gbps=peak_gbps,
        compute_unit=compute_unit if compute_unit in ("matrix", "vector") else None,
    )


def tflops_of(flops: int, mean_ms: float) -> float:
    """The specification's ``flops / (mean_ms / 1000) / 1e12``."""
    return flops / (mean_ms / 1000) / 1e12 if mean_ms > 0 else 0.0
