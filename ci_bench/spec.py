"""The public kernel API: what a kernel module imports to describe itself.

Kernels in this repository and in others import ``ci_bench.spec``; this path stays whatever
the layout behind it (the contract lives in ``ci_bench.contract.spec``).
"""

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

__all__ = [
    "COMPUTE_UNITS",
    "MODES",
    "PROFILES",
    "Case",
    "KernelSpec",
    "MatrixProfile",
    "Mode",
    "SpecError",
    "Tolerance",
    "as_inputs",
    "grid",
    "points",
]
