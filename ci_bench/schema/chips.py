"""The chips ci-bench knows, by name: one list for the config, the files and the model.

TPU chips by jax's names: jax's hardware table (``jax.experimental.pallas.tpu.
get_tpu_info_for_chip``) but v2/v3, which Pallas TPU does not target, in generation order
(the default targets on a CPU). The cost model's per-chip figures live in
``ci_bench.measure.model.chips``. NVIDIA GPUs by ci-bench's names (``schema.gpus``, with
their figures): a target (``target-chips``, ``--chip``) is either.
"""

from __future__ import annotations

from typing import Literal, get_args

from ci_bench.schema.gpus import GPU_NAMES, GpuName

ChipName = Literal["v4i", "v4", "v5e", "v5p", "v6e", "7", "7x", "8i"]
CHIP_NAMES: tuple[str, ...] = get_args(ChipName)
TargetName = ChipName | GpuName
TARGET_NAMES: tuple[str, ...] = CHIP_NAMES + GPU_NAMES


def split_targets(names: tuple[str, ...] | list[str]) -> tuple[list[str], list[str]]:
    """(the TPU chips, the GPUs) among target names, each in the order given."""
    return [n for n in names if n in CHIP_NAMES], [n for n in names if n in GPU_NAMES]
