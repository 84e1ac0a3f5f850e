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
from ci_bench.contract.tunables import Constraint, Tunables, at_most, divides
from ci_bench.contract.tuned import tuned_config

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
