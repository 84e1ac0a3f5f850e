"""The contract a kernel package fulfils: one `SPEC` object per kernel module.

A kernel module imports only this module from ci_bench. Everything the service needs to
benchmark a kernel (inputs, the three implementations, the cost model, tolerances and the
parameter matrix) is declared here, so third-party kernels plug in with one config line.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from ci_bench.text import NAME, NAME_MAX, PARAM, SEMVER

DTYPES = ("float32", "bfloat16", "float16")
PROFILES = ("smoke", "ci", "full")  # smallest first: a missing profile falls back down
COMPUTE_UNITS = ("matrix", "vector")
ComputeUnit = Literal["matrix", "vector"]


class SpecError(ValueError):
    """A kernel's SPEC breaks the contract (bad name, version, matrix or tolerance)."""


@dataclass(frozen=True)
class Case:
    """One point of a kernel's parameter matrix: integer parameters and a dtype."""

    kernel: str
    params: Mapping[str, int]
    dtype: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    @property
    def id(self) -> str:
        """Stable, readable id, e.g. ``matmul/B4-M1024-K1024-N1024/bfloat16``."""
        params = "-".join(f"{k}{v}" for k, v in self.params.items())
        return f"{self.kernel}/{params}/{self.dtype}"

    def __getitem__(self, key: str) -> int:
        return self.params[key]

    def get(self, key: str, default: int | None = None) -> int | None:
        return self.params.get(key, default)

    def __hash__(self) -> int:
        return hash(self.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Case) and other.id == self.id


@dataclass(frozen=True)
class Tolerance:
    """Elementwise check ``|out - ref| <= atol + rtol * |ref|`` for one dtype."""

    atol: float
    rtol: float

    def __post_init__(self) -> None:
        if not all(isinstance(v, int | float) and math.isfinite(v) for v in (self.atol, self.rtol)):
            raise SpecError(
                f"tolerance must be finite numbers, got atol={self.atol} rtol={self.rtol}"
            )
        if not (self.atol >= 0 and self.rtol >= 0):
            raise SpecError(
                f"tolerance must be non-negative, got atol={self.atol} rtol={self.rtol}"
            )


@dataclass(frozen=True)
class MatrixProfile:
    """Parameter points (dicts with the kernel's keys, in id order) times dtypes."""

    points: tuple[Mapping[str, int], ...]
    dtypes: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "points", tuple(MappingProxyType(dict(p)) for p in self.points))
        object.__setattr__(self, "dtypes", tuple(self.dtypes))
        if not self.points or not self.dtypes:
            raise SpecError("a matrix profile needs at least one point and one dtype")
        for dtype in self.dtypes:
            if dtype not in DTYPES:
                raise SpecError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
        for point in self.points:
            for key, value in point.items():
                if not isinstance(key, str) or not PARAM.fullmatch(key):
                    raise SpecError(f"parameter name {key!r} must match {PARAM.pattern}")
                if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                    raise SpecError(f"parameter {key}={value!r} must be a positive integer")


def grid(**axes: Sequence[int]) -> tuple[dict[str, int], ...]:
    """Cartesian product of named integer axes, keys kept in the order given."""
    names = list(axes)
    return tuple(
        dict(zip(names, values, strict=True)) for values in itertools.product(*axes.values())
    )


def points(*groups: Sequence[Mapping[str, int]]) -> tuple[dict[str, int], ...]:
    """Concatenate point groups, dropping duplicates while keeping the first order."""
    seen: dict[tuple[tuple[str, int], ...], dict[str, int]] = {}
    for group in groups:
        for point in group:
            seen.setdefault(tuple(point.items()), dict(point))
    return tuple(seen.values())


Inputs = tuple[Any, ...]


def as_inputs(value: Any, kernel: str = "kernel") -> Inputs:
    """``make_inputs``'s return value as the argument tuple of ``pallas(*inputs)``.

    A tuple is used as is, a list becomes a tuple and a single array (anything with a
    ``shape`` and a ``dtype``) is one argument; anything else is a SpecError saying what
    to return.
    """
    if isinstance(value, tuple):
        return value
    if isinstance(value, list):
        return tuple(value)
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return (value,)
    raise SpecError(
        f"kernel {kernel}: make_inputs must return a tuple of arrays (the arguments of "
        f"pallas(*inputs)) or one array, got {type(value).__name__}"
    )


@dataclass(frozen=True)
class KernelSpec:
    """Everything ci-bench needs to benchmark one kernel.

    ``pallas``, ``native`` and ``reference`` take ``*inputs`` as returned by ``make_inputs``
    and return an array (or a tuple/pytree of arrays). ``reference`` is the trusted
    implementation for the correctness gate (typically float32 and simple); ``native`` is
    what a user would write without Pallas, timed beside the kernel for the speedup.
    Every field, with its rules: docs/KERNEL_CONTRACT.md.
    """

    name: str
    version: str
    pallas: Callable[..., Any]
    native: Callable[..., Any]
    reference: Callable[..., Any]
    make_inputs: Callable[[Case, Any], Inputs]
    flops: Callable[[Case], int]
    bytes_accessed: Callable[[Case], int]
    tolerances: Mapping[str, Tolerance]
    matrix: Mapping[str, MatrixProfile]
    # Parameter keys that ``--shape a,b,c`` fills, in order (e.g. ("M", "K", "N")).
    shape_keys: tuple[str, ...]
    # Values for keys that ``--shape`` does not give (e.g. {"B": 1}).
    shape_defaults: Mapping[str, int] = field(default_factory=dict)
    description: str = ""
    # Where the FLOPs run: "matrix" (MXU / tensor cores: matmul-like ops) takes MFU against
    # the matrix-unit peak; "vector" (norms, softmax, elementwise) has no published peak, so
    # its MFU stays null rather than measured against a unit it does not use.
    compute_unit: ComputeUnit = "vector"

    def __post_init__(self) -> None:
        if not NAME.fullmatch(self.name):
            raise SpecError(f"kernel name {self.name!r} must match {NAME.pattern}")
        if not SEMVER.fullmatch(self.version) or len(self.version) > NAME_MAX:
            raise SpecError(f"kernel {self.name}: version {self.version!r} is not semver")
        unknown = [p for p in self.matrix if p not in PROFILES]
        if unknown or not self.matrix:
            raise SpecError(
                f"kernel {self.name}: matrix wants one or more of {', '.join(PROFILES)}, "
                f"got {', '.join(map(repr, self.matrix)) or 'none'}"
            )
        if self.compute_unit not in COMPUTE_UNITS:
            raise SpecError(
                f"kernel {self.name}: compute_unit must be one of {', '.join(COMPUTE_UNITS)}, "
                f"got {self.compute_unit!r}"
            )
        for profile in self.matrix.values():
            for dtype in profile.dtypes:
                if dtype not in self.tolerances:
                    raise SpecError(f"kernel {self.name}: no tolerance for dtype {dtype}")
        object.__setattr__(self, "tolerances", MappingProxyType(dict(self.tolerances)))
        object.__setattr__(self, "matrix", MappingProxyType(dict(self.matrix)))
        object.__setattr__(self, "shape_defaults", MappingProxyType(dict(self.shape_defaults)))

    def profile_for(self, profile: str) -> str:
        """The declared profile that stands in for ``profile``: itself, else the nearest
        smaller one (full -> ci -> smoke), else the smallest declared."""
        if profile not in PROFILES:
            raise SpecError(f"kernel {self.name}: unknown profile {profile!r}")
        order = PROFILES[: PROFILES.index(profile) + 1][::-1] + PROFILES[PROFILES.index(profile) :]
        return next(p for p in order if p in self.matrix)

    def cases(self, profile: str) -> list[Case]:
        """The profile's cases in declaration order (points outer, dtypes inner); an
        undeclared profile uses ``profile_for``'s stand-in."""
        prof = self.matrix[self.profile_for(profile)]
        return [Case(self.name, p, d) for p in prof.points for d in prof.dtypes]

    def case_from_shape(self, shape: Sequence[int], dtype: str) -> Case:
        """The specification's ad-hoc interface: ``--shape M,K,N --dtype bfloat16``."""
        keys = tuple(self.shape_defaults) + self.shape_keys
        if len(shape) == len(self.shape_keys):
            params = {**self.shape_defaults, **dict(zip(self.shape_keys, shape, strict=True))}
        elif len(shape) == len(keys):
            params = dict(zip(keys, shape, strict=True))
        else:
            want = ",".join(self.shape_keys)
            raise SpecError(
                f"kernel {self.name}: --shape wants {want} ({len(self.shape_keys)} ints)"
            )
        if dtype not in self.tolerances:
            raise SpecError(f"kernel {self.name}: no tolerance for dtype {dtype!r}")
        ordered = {k: params[k] for k in keys}
        MatrixProfile((ordered,), (dtype,))  # validates the values
        return Case(self.name, ordered, dtype)
