"""Compile for a TPU on a host without one: libtpu's own compiler, aimed at a topology.

libtpu (the wheel ``jax[tpu]`` installs) compiles for a TPU it is not attached to when jax is
given a topology description instead of a device: ``jax.experimental.topologies`` builds the
v5e's device, and a program whose inputs are placed on it is lowered and compiled by the same
Mosaic and XLA:TPU passes the chip's host runs, down to the refusal of a tiling whose scoped
VMEM passes ``vmem_limit_bytes``. Nothing runs, so this answers only compile-time questions
(does it fit, what did the compiler allocate), never timings.

libtpu reads the accelerator type and the worker list from the environment while it starts;
off a TPU VM it finds neither, so they are set here, before jax first opens a backend.
"""

from __future__ import annotations

import importlib.metadata
import os
from typing import Any

# The topology name jax's topologies API takes, and the accelerator type libtpu expects in
# TPU_ACCELERATOR_TYPE, per chip name this project's model uses.
TOPOLOGIES = {"v5e": ("v5e:1x1", "v5litepod-1"), "v6e": ("v6e:1x1", "v6e-1")}


def target(chip: str) -> Any:
    """A ``SingleDeviceSharding`` on ``chip``'s one-chip topology, for ``ShapeDtypeStruct``
    inputs; the program they feed compiles for that chip. Exits with one line when libtpu
    is absent or refuses (another process holds its lock file: ``ALLOW_MULTIPLE_LIBTPU_LOAD``)."""
    topology, accelerator = TOPOLOGIES[chip]
    os.environ.setdefault("TPU_ACCELERATOR_TYPE", accelerator)
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
    import jax
    from jax.experimental import topologies
    from jax.sharding import SingleDeviceSharding

    try:
        importlib.metadata.version("libtpu")
    except importlib.metadata.PackageNotFoundError:
        raise SystemExit(
            f"--deviceless {chip}: libtpu is not installed here "
            f"(pip install 'jax[tpu]=={jax.__version__}')"
        ) from None
    try:
        described = topologies.get_topology_desc(
            platform="tpu", topology_name=topology, chips_per_host_bounds=(1, 1, 1)
        )
    except Exception as exc:  # libtpu's own words (a lock file held by another process)
        words = " ".join(str(exc).split())
        raise SystemExit(f"--deviceless {chip}: libtpu refused: {words}") from None
    return SingleDeviceSharding(described.devices[0])


def compiled_for(chip: str, sharding: Any) -> dict[str, Any]:
    """What a record compiled this way says it was compiled for (beside the host's own
    fingerprint, which names the CPU it ran on)."""
    return {
        "chip": chip,
        "topology": TOPOLOGIES[chip][0],
        "device_kind": next(iter(sharding.device_set)).device_kind,
        "libtpu": importlib.metadata.version("libtpu"),
        "how": "deviceless compile (jax.experimental.topologies), nothing run",
    }
