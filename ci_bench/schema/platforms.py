"""THE platform table: what ci-bench needs to know of each jax platform, one entry each.

Measuring reads it (``measure.timers``: the default timer; ``measure.workers``: a worker's
environment and whether there is one worker per device; ``measure.devices``: the toolchain
and driver the fingerprint records; ``measure.roofline``: where the peaks come from), the
lowering role reads its target, ``init`` its constraints file. Supporting a platform is one
entry here (plus, for peaks from a vendor table, its devices in ``measure.roofline``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ci_bench.schema.timers import TimerName

# Where a device's peak compute and bandwidth come from (``measure.roofline``): jax's TPU
# hardware table, the vendors' published figures, or nowhere (no peaks, no MFU).
PeakSource = Literal["jax-chips", "vendor-table"]


@dataclass(frozen=True)
class Driver:
    """A driver version read from a file of the host (a driver bump changes timings)."""

    name: str  # the key in the fingerprint's toolchain
    path: str
    pattern: str  # a regex whose first group is the version


@dataclass(frozen=True)
class Platform:
    name: str  # jax's device platform
    default_timer: TimerName
    # A worker's environment, giving it device ``{index}`` alone (``{port}``: port_base +
    # index); empty where workers share the host.
    worker_env: tuple[tuple[str, str], ...] = ()
    port_base: int = 0
    one_worker_per_device: bool = False
    # Distributions whose versions, beside jax and jaxlib, make the toolchain: each entry is
    # its alternatives, the first name found is recorded (under the entry's first name).
    toolchain: tuple[tuple[str, ...], ...] = ()
    driver: Driver | None = None
    peaks: PeakSource | None = None
    lowering: Literal["tpu", "cuda"] | None = None  # jax.export's name for the platform
    lowered_on_every_pr: bool = False  # the lower role's target (a CPU runner, no secrets)
    install: str = "jax"  # the pip requirement a workflow installs jax with
    extra: str | None = None  # jax's extra that names the toolchain's versions
    constraints_header: str = ""  # ``init``'s constraints/<name>.txt, before its pins
    # ``init --platform``'s callers: the self-hosted runner labels of the pull-request pool
    # and of the release pool (which never runs pull-request code).
    runner_labels: tuple[str, ...] = ()
    release_labels: tuple[str, ...] = ()
    # The unit roundoff of a float32 x float32 dot at jax's DEFAULT precision: its operands
    # are rounded to bfloat16 on a TPU (8 significant bits: 2**-8) and to TF32 on an NVIDIA
    # GPU (11: 2**-11); None where it is exact float32 (CPU). The correctness gate's float32
    # floor comes from it (measure/correctness.py, docs/KERNEL_CONTRACT.md).
    float32_dot_roundoff: float | None = None


PLATFORMS: tuple[Platform, ...] = (
    Platform("cpu", default_timer="wallclock"),
    Platform(
        "tpu",
        # Device time: on a TPU v5e the host round trip is 0.55-0.63 ms a call while the
        # smoke cases run 1-75 µs on the chip, and the profiler timer read the same 0.98 µs
        # as an independent reading of the trace (issue 50).
        default_timer="profiler",
        float32_dot_roundoff=2.0**-8,
        worker_env=(
            ("TPU_CHIPS_PER_PROCESS_BOUNDS", "1,1,1"),
            ("TPU_PROCESS_BOUNDS", "1,1,1"),
            ("TPU_VISIBLE_CHIPS", "{index}"),
            ("TPU_VISIBLE_DEVICES", "{index}"),  # older libtpu spelling
            ("TPU_PROCESS_PORT", "{port}"),
            ("TPU_MESH_CONTROLLER_ADDRESS", "localhost:{port}"),
            ("TPU_MESH_CONTROLLER_PORT", "{port}"),
        ),
        port_base=8476,
        one_worker_per_device=True,
        toolchain=(("libtpu", "libtpu-nightly"),),
        peaks="jax-chips",
        lowering="tpu",
        lowered_on_every_pr=True,
        install="jax[tpu]",
        extra="tpu",
        runner_labels=("self-hosted", "tpu"),
        release_labels=("self-hosted", "tpu-trusted"),
        constraints_header=(
            "# The TPU toolchain every benchmark, A/B and promotion job installs (pip install "
            "-c).\n# A jax, jaxlib or libtpu release changes compiled code and so timings: "
            "bump the three\n# together, in a reviewed change (jax's metadata names libtpu "
            "for its tpu extra).\n"
        ),
    ),
    Platform(
        "gpu",
        default_timer="wallclock",
        float32_dot_roundoff=2.0**-11,
        worker_env=(("CUDA_VISIBLE_DEVICES", "{index}"),),
        one_worker_per_device=True,
        toolchain=(
            ("jax-cuda12-plugin", "jax-cuda13-plugin"),
            ("jax-cuda12-pjrt", "jax-cuda13-pjrt"),
        ),
        driver=Driver("nvidia-driver", "/proc/driver/nvidia/version", r"Kernel Module\s+([\w.-]+)"),
        peaks="vendor-table",
        lowering="cuda",
        install="jax[cuda12]",
        extra="cuda12",
        runner_labels=("self-hosted", "gpu"),
        release_labels=("self-hosted", "gpu-trusted"),
        constraints_header=(
            "# The GPU toolchain every benchmark, A/B and promotion job installs (pip install "
            "-c).\n# A jax, jaxlib or CUDA plugin release changes compiled code and so "
            "timings: bump them\n# together, in a reviewed change (jax's metadata names the "
            "plugin for its cuda12 extra).\n# The NVIDIA driver is the runner's: the "
            "fingerprint records it, a bump reads as toolchain.\n"
        ),
    ),
)
PLATFORM = {p.name: p for p in PLATFORMS}
PLATFORM_NAMES: tuple[str, ...] = tuple(PLATFORM)
# The platform the lower role exports for on every pull request.
LOWER_ROLE_TARGET: str = next(p.lowering or p.name for p in PLATFORMS if p.lowered_on_every_pr)
# jax.export's names of the platforms ci-bench lowers for (``lower --platform``, ``run
# --lower``): "tpu", "cuda".
LOWERING_NAMES: tuple[str, ...] = tuple(p.lowering for p in PLATFORMS if p.lowering)
# Platforms ``init --platform`` writes callers and constraints for (self-hosted runners).
INIT_PLATFORMS: tuple[str, ...] = tuple(p.name for p in PLATFORMS if p.runner_labels)


def lower_role_platform(targets: tuple[str, ...] | list[str], gpus: tuple[str, ...]) -> str:
    """The platform the lower role exports for: CUDA when the config's targets are GPUs
    only (``gpus``: the GPU names), else the table's (TPU)."""
    if targets and all(t in gpus for t in targets):
        return PLATFORM["gpu"].lowering or "cuda"
    return LOWER_ROLE_TARGET


def platform_of(name: str) -> Platform:
    """The entry of jax's platform ``name``; an unknown platform is a CPU-like host (no
    workers per device, no peaks, the default timer)."""
    return PLATFORM.get(name) or Platform(name, default_timer=PLATFORM["cpu"].default_timer)
