"""Device fingerprint: what a result was measured on (an edge: reads the machine)."""

from __future__ import annotations

import platform
import re
import socket
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from ci_bench.schema import DeviceFingerprint
from ci_bench.schema.platforms import Platform, platform_of


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


def toolchain(
    entry: Platform,
    version: Callable[[str], str | None] = _version,
    read: Callable[[str], str | None] = _read,
) -> dict[str, str]:
    """The platform's toolchain beside jax and jaxlib (the platform table's packages, the
    driver): name -> version, what is found. A change of any of them reads as
    ``toolchain``, never as a regression of the code."""
    found: dict[str, str] = {}
    for alternatives in entry.toolchain:
        got = next((v for v in map(version, alternatives) if v), None)
        if got:
            found[alternatives[0]] = got
    if entry.driver is not None:
        match = re.search(entry.driver.pattern, read(entry.driver.path) or "")
        if match:
            found[entry.driver.name] = match[1]
    return found


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
    found = toolchain(platform_of(first.platform))
    return DeviceFingerprint(
        platform=first.platform,
        device_kind=str(first.device_kind),
        device_count=len(devices),
        cpu_model=cpu_model(),
        hostname=socket.gethostname(),
        python=sys.version.split()[0],
        jax=jax.__version__,
        jaxlib=_version("jaxlib") or "unknown",
        libtpu=found.pop("libtpu", None),  # its own field since format 1
        toolchain=found or None,
    )


def cpu_only_here() -> bool:
    """Tell jax in this (orchestrating) process to use the CPU alone, before anything can
    initialise another backend: only one process may hold a TPU chip, and it must be the
    worker's. False when a backend is already up (nothing is changed then)."""
    import jax
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():
        return False
    jax.config.update("jax_platforms", "cpu")
    return True
