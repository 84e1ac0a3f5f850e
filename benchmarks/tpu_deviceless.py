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
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: ci_bench
# The topology name jax's topologies API takes, and the accelerator type libtpu expects in
# TPU_ACCELERATOR_TYPE, per chip name this project's model uses (what ``ci-bench remodel
# --deviceless`` compiles for).
from ci_bench.measure.deviceless import TOPOLOGIES


def target(chip: str) -> Any:
    """A ``SingleDeviceSharding`` on ``chip``'s one-chip topology, for ``ShapeDtypeStruct``
    inputs; the program they feed compiles for that chip (``ci_bench.measure.deviceless``,
    libtpu told the chip's accelerator type first). Exits with one line when libtpu is absent
    or refuses (another process holds its lock file: ``ALLOW_MULTIPLE_LIBTPU_LOAD``)."""
    from ci_bench.measure import deviceless

    for key in ("TPU_ACCELERATOR_TYPE", "TPU_WORKER_HOSTNAMES"):
        os.environ.setdefault(key, deviceless.worker_env(chip)[key])
    try:
        return deviceless.sharding(chip)
    except deviceless.DevicelessError as exc:
        raise SystemExit(f"--deviceless {chip}: {exc}") from None


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


def stored_layouts(chip: str) -> Any:
    """The layouts libtpu gives a function's inputs when compiling for ``chip`` (its default:
    what the chip's own client answers), as the cost model takes them
    (``ci_bench.measure.model.layouts.Stored``): a CPU host modelling a v5e's layouts."""
    from ci_bench.measure import deviceless
    from ci_bench.measure.model.layouts import parse_major_to_minor

    target(chip)  # libtpu told the chip first, or one line why not

    def ask(shape: tuple[int, ...], dtype: str) -> tuple[int, ...] | None:
        printed = deviceless.printed_layout(chip, tuple(shape), dtype)
        return None if printed is None else parse_major_to_minor(printed)

    return ask


def main() -> int:
    """``--against FILE``: libtpu's layouts beside the ones a chip's client answered
    (``default_layouts`` of ``tpu_matmul_batch_middle.py``'s JSON); exits 1 on a mismatch."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--chip", default="v5e", choices=sorted(TOPOLOGIES))
    parser.add_argument("--against", type=Path, required=True)
    opts = parser.parse_args()
    ask = stored_layouts(opts.chip)
    from ci_bench.measure.model.layouts import parse_major_to_minor

    wrong = 0
    answered = json.loads(opts.against.read_text())["default_layouts"]
    for key, printed in answered.items():
        dtype, dims = key.rstrip("]").split("[")
        shape = tuple(int(d) for d in dims.split(","))
        chip, here = parse_major_to_minor(printed), ask(shape, dtype)
        wrong += chip != here
        print(f"{key}: chip {chip}, libtpu here {here}{'' if chip == here else '  MISMATCH'}")
    print(f"{len(answered) - wrong} of {len(answered)} agree")
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
