"""A TPU's layouts answered on a host without it: libtpu's compiler aimed at its topology.

On a TPU the cost model and the kernels that choose a path by layout ask the chip's client
how it stores a new array (``measure.chip``); off one they take every array row-major, so a
CPU models some cases otherwise than the chip's run did (the project's batched float32
matmul at 513³: its layout picks the kernel). libtpu, where it is installed (``jax[tpu]``),
compiles for a TPU it is not attached to when jax is given a topology description instead of
a device, and the layouts it picks for a program's inputs are the chip client's own (24 of
24 of the matmul's batched shapes on a v5e, docs/MODEL.md, "The chip's stored layouts").
``ci-bench remodel --deviceless CHIP`` sets ``ENV`` in its worker's environment;
``measure.chip`` then answers from here. Nothing runs on a chip and nothing is timed: only
layouts are asked.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ci_bench.errors import InputError

# The chip a worker answers layouts for (set by the parent, read here).
ENV = "CI_BENCH_DEVICELESS"
# jax's topology name and the accelerator type libtpu expects, per chip libtpu compiles for
# with one chip attached to nothing.
TOPOLOGIES = {"v5e": ("v5e:1x1", "v5litepod-1"), "v6e": ("v6e:1x1", "v6e-1")}


class DevicelessError(RuntimeError):
    """libtpu is missing or refused to describe the chip (its own words)."""


def libtpu_missing() -> str | None:
    """Why this host cannot compile for a TPU without one (libtpu not installed), or None.
    Reads the installed packages only: libtpu is not loaded."""
    import importlib.metadata

    try:
        importlib.metadata.version("libtpu")
    except importlib.metadata.PackageNotFoundError:
        return "libtpu is not installed here (pip install 'jax[tpu]', the host's jax version)"
    return None


def worker_env(chip: str) -> dict[str, str]:
    """The worker's environment for answering ``chip``'s layouts: the chip named, libtpu
    told its accelerator type and a one-host worker list (it reads both while it starts;
    off a TPU VM it finds neither), and allowed to load beside another process's libtpu (no
    chip is contended for); jax itself stays on the CPU."""
    accelerator = TOPOLOGIES[chip][1]
    return {
        ENV: chip,
        "TPU_ACCELERATOR_TYPE": accelerator,
        "TPU_WORKER_HOSTNAMES": "localhost",
        "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
        "JAX_PLATFORMS": "cpu",
    }


def worker_environment(env: Mapping[str, str], chip: str | None) -> Mapping[str, str]:
    """The environment a kernel worker gets: ``env``, or with ``chip`` one that answers that
    chip's layouts without it; refused in one line where libtpu is missing or the host has
    an accelerator of its own (libtpu would load beside the chip's)."""
    if chip is None:
        return env
    from ci_bench.measure.workers import accelerator_present

    if accelerator_present(env):
        raise InputError(
            f"--deviceless {chip}: this host has an accelerator; model its own chip without "
            "--deviceless, others on a host without one"
        )
    missing = libtpu_missing()
    if missing:
        raise InputError(f"--deviceless {chip}: {missing}")
    return {**env, **worker_env(chip)}


def requested(env: Mapping[str, str] = os.environ) -> str | None:
    """The chip this process answers layouts for without it, if its parent asked."""
    chip = env.get(ENV, "").strip()
    return chip if chip in TOPOLOGIES else None


def printed(major_to_minor: Sequence[int], tiling: Sequence[Sequence[int]]) -> str:
    """A layout as XLA prints it (``{2,0,1:T(4,128)}``, ``{2,1,0:T(8,128)(2,1)}``: the
    braces list minor to major, one T before the tiles), from jax's ``Layout`` fields."""
    tiles = "".join("(" + ",".join(map(str, tile)) + ")" for tile in tiling)
    order = ",".join(map(str, reversed(tuple(major_to_minor))))
    return "{" + order + (":T" + tiles if tiles else "") + "}"


@functools.cache
def sharding(chip: str) -> Any:
    """A one-chip sharding on ``chip``'s topology: a program whose inputs are placed on it
    compiles for that chip."""
    from jax.experimental import topologies
    from jax.sharding import SingleDeviceSharding

    missing = libtpu_missing()
    if missing:
        raise DevicelessError(missing)
    try:
        described = topologies.get_topology_desc(
            platform="tpu", topology_name=TOPOLOGIES[chip][0], chips_per_host_bounds=(1, 1, 1)
        )
    except Exception as exc:  # libtpu's own words (its lock file held, a wrong accelerator)
        raise DevicelessError("libtpu refused: " + " ".join(str(exc).split())) from None
    return SingleDeviceSharding(described.devices[0])


@functools.cache
def printed_layout(chip: str, shape: tuple[int, ...], dtype: str) -> str | None:
    """The layout ``chip`` stores a new ``dtype[shape]`` array in, as libtpu compiles an
    identity program's input for it; None for a shape or dtype it will not take alone."""
    import jax
    import numpy as np

    if not shape:
        return "{}"
    arg = jax.ShapeDtypeStruct(shape, np.dtype(dtype), sharding=sharding(chip))
    try:
        compiled = jax.jit(lambda x: x).lower(arg).compile()
    except Exception:  # the compiler's refusal of this one array: unknown, as a client's
        return None
    layout = compiled.input_formats[0][0].layout
    return printed(layout.major_to_minor, layout.tiling or ())
