"""The chips ci-bench knows, by name: one list for the config, the files and the model.

TPU chips by jax's names: jax's hardware table (``jax.experimental.pallas.tpu.
get_tpu_info_for_chip``) but v2/v3, which Pallas TPU does not target, in generation order
(the default targets on a CPU). The cost model's per-chip figures live in
``ci_bench.measure.model.chips``. NVIDIA GPUs by ci-bench's names (``schema.gpus``, with
their figures): a target (``target-chips``, ``--chip``) is either.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

from ci_bench.schema.gpus import GPU_NAMES, GpuName

ChipName = Literal["v4i", "v4", "v5e", "v5p", "v6e", "7", "7x", "8i"]
CHIP_NAMES: tuple[str, ...] = get_args(ChipName)


def chip_label(name: str) -> str:
    """A chip as a reader names it (``TPU v5e``, ``TPU 7``, ``H200``): jax's bare ``7``
    reads as a stray number beside a figure."""
    return name.upper() if name in GPU_NAMES else f"TPU {name}"


def chip_list(names: list[str] | tuple[str, ...]) -> str:
    """``TPU v4, TPU v5e and TPU v5p``."""
    labels = [chip_label(n) for n in names]
    return labels[0] if len(labels) == 1 else f"{', '.join(labels[:-1])} and {labels[-1]}"


def on_chips(names: list[str] | tuple[str, ...], targets: list[str] | tuple[str, ...]) -> str:
    """Where one reason holds: ``on all 8 target chips`` when it holds on every target
    (more than one), else ``on TPU v4 and TPU v5e``."""
    if len(names) > 1 and set(names) == set(targets):
        return f"on all {len(names)} target chips"
    return f"on {chip_list(names)}"


_LONGEST_FIRST = sorted(map(re.escape, CHIP_NAMES), key=len, reverse=True)
_BARE = re.compile(r"\bon (" + "|".join(_LONGEST_FIRST) + r")\b")


def chips_named(text: str) -> str:
    """A judge's reason with each ``on <chip>`` read as a chip (``on 7`` -> ``on TPU 7``)."""
    return _BARE.sub(lambda m: f"on {chip_label(m[1])}", text)


TargetName = ChipName | GpuName
TARGET_NAMES: tuple[str, ...] = CHIP_NAMES + GPU_NAMES


def split_targets(names: tuple[str, ...] | list[str]) -> tuple[list[str], list[str]]:
    """(the TPU chips, the GPUs) among target names, each in the order given."""
    return [n for n in names if n in CHIP_NAMES], [n for n in names if n in GPU_NAMES]
