"""The TPU chips ci-bench knows, by jax's names: one list for the config, the files and the model.

jax's hardware table (``jax.experimental.pallas.tpu.get_tpu_info_for_chip``) but v2/v3, which
Pallas TPU does not target, in generation order (the default targets on a CPU or GPU). The
cost model's per-chip figures live in ``ci_bench.measure.model.chips``.
"""

from __future__ import annotations

from typing import Literal, get_args

ChipName = Literal["v4i", "v4", "v5e", "v5p", "v6e", "7", "7x", "8i"]
CHIP_NAMES: tuple[str, ...] = get_args(ChipName)
