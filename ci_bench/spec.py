"""The public kernel API: what a kernel module imports to describe itself.

Kernels in this repository and in others import ``ci_bench.spec``; this path stays whatever
the layout behind it (the contract lives in ``ci_bench.contract.spec``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ci_bench.contract.spec import (
    COMPUTE_UNITS,
    MODES,
    PROFILES,
    Case,
    KernelSpec,
    MatrixProfile,
    Mode,
    SpecError,
    Tolerance,
    as_inputs,
    grid,
    points,
)
from ci_bench.contract.tunables import Constraint, Tunables, at_most, divides
from ci_bench.contract.tuned import tuned_config as _tuned_config_on

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path


def tuned_config(
    kernel: str,
    version: str,
    params: Mapping[str, int],
    dtype: str,
    *,
    directory: str | Path,
    default: Mapping[str, Any],
    mode: str = "forward",
    chip: str | None = None,
    tunables: Tunables | None = None,
) -> dict[str, Any]:
    """The case's tuned config on ``chip`` (None: the TPU this process runs on, detected
    only then), else ``default``; see ``ci_bench.contract.tuned.tuned_config``."""
    if chip is None:
        from ci_bench.measure.chip import this_chip

        chip = this_chip()
    return _tuned_config_on(
        kernel,
        version,
        params,
        dtype,
        directory=directory,
        default=default,
        mode=mode,
        chip=chip,
        tunables=tunables,
    )


__all__ = [
    "COMPUTE_UNITS",
    "MODES",
    "PROFILES",
    "Case",
    "Constraint",
    "KernelSpec",
    "MatrixProfile",
    "Mode",
    "SpecError",
    "Tolerance",
    "Tunables",
    "as_inputs",
    "at_most",
    "divides",
    "grid",
    "points",
    "tuned_config",
]
