"""Device fingerprint: what a result was measured on (an edge: reads the machine)."""

from __future__ import annotations

import platform
import socket
import sys
from importlib import metadata
from pathlib import Path

from ci_bench.schema import DeviceFingerprint


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The host CPU's model name (Linux /proc/cpuinfo, else the platform module)."""
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def fingerprint() -> DeviceFingerprint:
    """Fingerprint of jax's default device and the host."""
    import jax

    devices = jax.devices()
    first = devices[0]
    return DeviceFingerprint(
        platform=first.platform,
        device_kind=str(first.device_kind),
        device_count=len(devices),
        cpu_model=cpu_model(),
        hostname=socket.gethostname(),
        python=sys.version.split()[0],
        jax=jax.__version__,
        jaxlib=_version("jaxlib") or "unknown",
        libtpu=_version("libtpu") or _version("libtpu-nightly"),
    )
