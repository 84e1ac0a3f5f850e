"""The contract a kernel package fulfils: one `SPEC` object per kernel module.

A kernel module imports only this module from ci_bench. Everything the service needs to
benchmark a kernel (inputs, its implementations, the modes it is timed in, the cost model,
tolerances and the parameter matrix) is declared here, so third-party kernels plug in with
one config line.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from ci_bench.errors import SpecError as SpecError
from ci_bench.text import NAME, NAME_MAX, PARAM, SEMVER

if TYPE_CHECKING:
    from ci_bench.contract.tunables import Tunables

DTYPES = ("float32", "bfloat16", "float16")
PROFILES = ("smoke", "ci", "full")  # smallest first: a missing profile falls back down
COMPUTE_UNITS = ("matrix", "vector")
ComputeUnit = Literal["matrix", "vector"]
# What a case times: the kernel's call, its VJP alone (residuals computed beforehand,
# outside the timed region) or both in one call (forward, then the VJP of its output).
MODES = ("forward", "backward", "forward+backward")
Mode = Literal["forward", "backward", "forward+backward"]
# The implementations every SPEC has; ``variants`` adds named others.
PALLAS, NATIVE = "pallas", "native"


@dataclass(frozen=True)
class Case:
    """One point of a kernel's parameter matrix: integer parameters and a dtype."""

    kernel: str
    params: Mapping[str, int]
    dtype: str
    mode: Mode = "forward"

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        if self.mode not in MODES:
            raise SpecError(f"unknown mode {self.mode!r}; expected one of {', '.join(MODES)}")

    @property
    def id(self) -> str:
        """Stable, readable id: ``matmul/B4-M1024-K1024-N1024/bfloat16`` for the forward
        mode (the id cases had before modes existed, so stored baselines still match), the
        mode appended otherwise: ``matmul/B4-M1024-K1024-N1024/bfloat16/backward``."""
        return case_id(self.kernel, self.params, self.dtype, self.mode)

    def with_mode(self, mode: Mode) -> Case:
        """The same point and dtype in another mode."""
        return Case(self.kernel, self.params, self.dtype, mode)

    def __getitem__(self, key: str) -> int:
        return self.params[key]

    def get(self, key: str, default: int | None = None) -> int | None:
        return self.params.get(key, default)

    def __hash__(self) -> int:
        return hash(self.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Case) and other.id == self.id


def case_id(kernel: str, params: Mapping[str, int], dtype: str, mode: str = "forward") -> str:
    """``kernel/params/dtype`` and, for any mode but forward, ``/mode``."""
    joined = "-".join(f"{k}{v}" for k, v in params.items())
    base = f"{kernel}/{joined}/{dtype}"
    return base if mode == "forward" else f"{base}/{mode}"


def _check_modes(modes: Sequence[str], what: str) -> tuple[Mode, ...]:
    modes = tuple(modes)
    if not modes:
        raise SpecError(f"{what}: at least one mode is needed ({', '.join(MODES)})")
    for mode in modes:
        if mode not in MODES:
            raise SpecError(f"{what}: unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    if len(set(modes)) != len(modes):
        raise SpecError(f"{what}: modes {modes} repeat one")
    return modes  # type: ignore[return-value]


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
    """Parameter points (dicts with the kernel's keys, in id order) times dtypes times
    modes. ``modes``: the modes this profile runs, of those the kernel declares (a kernel
    narrowed to fewer modes narrows its profiles too); None: every mode it declares."""

    points: tuple[Mapping[str, int], ...]
    dtypes: tuple[str, ...]
    modes: tuple[Mode, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "points", tuple(MappingProxyType(dict(p)) for p in self.points))
        object.__setattr__(self, "dtypes", tuple(self.dtypes))
        if self.modes is not None:
            object.__setattr__(self, "modes", _check_modes(self.modes, "matrix profile"))
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

    ``pallas``, ``native``, ``reference`` and every variant take ``*inputs`` as returned by
    ``make_inputs`` and return an array (or a tuple/pytree of arrays). ``reference`` is the
    trusted implementation for the correctness gate (typically float32 and simple); the
    ``subject`` (``pallas`` unless told) is the implementation judged, the ``baseline``
    (``native`` unless told) what it is timed against for the speedup. One SPEC covers
    every mode of the kernel. Every field, with its rules: docs/KERNEL_CONTRACT.md.
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
    # The modes a case can time; a profile's ``modes`` picks among them.
    modes: tuple[Mode, ...] = ("forward",)
    # More implementations, by name, timed beside pallas and native in the same case.
    variants: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    # Which implementation the verdicts judge (its numbers are the case's ``pallas``) and
    # which it is measured against (the case's ``native``).
    subject: str = PALLAS
    baseline: str = NATIVE
    # Cost of one backward (VJP) call; None derives it (docs/KERNEL_CONTRACT.md, "Modes").
    backward_flops: Callable[[Case], int] | None = None
    backward_bytes: Callable[[Case], int] | None = None
    # Gradient tolerances per dtype; None uses ``tolerances``.
    grad_tolerances: Mapping[str, Tolerance] | None = None
    # The inputs as shapes and dtypes (jax.ShapeDtypeStruct) per case, so tracing, lowering
    # and check-spec build no arrays; None: jax.eval_shape of make_inputs.
    input_specs: Callable[[Case], Inputs] | None = None
    # Names of the inputs, for messages ("incorrect gradient for b"); default: the
    # parameter names of ``pallas``.
    input_names: tuple[str, ...] = ()
    # Positions of the inputs that are differentiated; None: every floating-point input.
    grad_inputs: tuple[int, ...] | None = None
    # The subject's knobs (block sizes) and their candidates, for ``ci-bench tune``
    # (ci_bench.contract.tunables); the subject keeps its default config.
    tunables: Tunables | None = None
    # On a CPU: "tpu" runs this kernel under jax's TPU interpreter (a TPU-only kernel with
    # no `interpret` argument), "kernel" its own interpret choice; None: the config's
    # `cpu-interpret`. Config `cpu-interpret-tpu` and the --cpu-interpret flag come first.
    cpu_interpret: Literal["kernel", "tpu"] | None = None

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
        if self.cpu_interpret not in (None, "kernel", "tpu"):
            raise SpecError(
                f"kernel {self.name}: cpu_interpret must be 'kernel', 'tpu' or None, "
                f"got {self.cpu_interpret!r}"
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
        object.__setattr__(self, "variants", MappingProxyType(dict(self.variants)))
        self._check_modes()
        self._check_implementations()
        if self.tunables is not None:
            from ci_bench.contract.tunables import Tunables

            if not isinstance(self.tunables, Tunables):
                raise SpecError(
                    f"kernel {self.name}: tunables must be a Tunables, "
                    f"got {type(self.tunables).__name__}"
                )

    def _check_modes(self) -> None:
        modes = _check_modes(self.modes, f"kernel {self.name}")
        object.__setattr__(self, "modes", modes)
        for name in self.matrix:
            if not self.profile_modes(name):
                raise SpecError(
                    f"kernel {self.name}: profile {name} runs none of the kernel's modes "
                    f"({', '.join(modes)})"
                )
        if self.grad_tolerances is not None:
            object.__setattr__(
                self, "grad_tolerances", MappingProxyType(dict(self.grad_tolerances))
            )
            for name, profile in self.matrix.items():
                if self.profile_modes(name) == ("forward",):
                    continue
                for dtype in profile.dtypes:
                    if dtype not in self.grad_tolerances:
                        raise SpecError(
                            f"kernel {self.name}: no gradient tolerance for dtype {dtype}"
                        )
        object.__setattr__(self, "input_names", tuple(self.input_names))
        if self.grad_inputs is not None:
            object.__setattr__(self, "grad_inputs", tuple(self.grad_inputs))

    def _check_implementations(self) -> None:
        for name in self.variants:
            if not isinstance(name, str) or not NAME.fullmatch(name) or len(name) > 32:
                raise SpecError(
                    f"kernel {self.name}: variant name {name!r} must match {NAME.pattern} "
                    "(at most 32 characters)"
                )
            if name in (PALLAS, NATIVE):
                raise SpecError(f"kernel {self.name}: variant name {name!r} is taken")
        known = list(self.implementations)
        for role in ("subject", "baseline"):
            if getattr(self, role) not in known:
                raise SpecError(
                    f"kernel {self.name}: {role} {getattr(self, role)!r} is not an "
                    f"implementation ({', '.join(known)})"
                )
        if self.subject == self.baseline:
            raise SpecError(f"kernel {self.name}: subject and baseline are both {self.subject!r}")

    @property
    def implementations(self) -> Mapping[str, Callable[..., Any]]:
        """Every implementation by name: pallas, native, then the variants."""
        return MappingProxyType({PALLAS: self.pallas, NATIVE: self.native, **self.variants})

    @property
    def others(self) -> tuple[str, ...]:
        """The implementations timed beside the subject and the baseline."""
        return tuple(n for n in self.implementations if n not in (self.subject, self.baseline))

    def tolerance(self, dtype: str, *, gradient: bool = False) -> Tolerance:
        """The tolerance for outputs (or gradients) of this dtype."""
        table = self.grad_tolerances if gradient and self.grad_tolerances else self.tolerances
        return table[dtype]

    def profile_modes(self, profile: str) -> tuple[Mode, ...]:
        """The modes a declared profile runs: its own ``modes`` (all of the kernel's when
        None), of those the kernel declares, in the profile's order."""
        wanted = self.matrix[profile].modes or self.modes
        return tuple(m for m in wanted if m in self.modes)

    def profile_for(self, profile: str) -> str:
        """The declared profile that stands in for ``profile``: itself, else the nearest
        smaller one (full -> ci -> smoke), else the smallest declared."""
        if profile not in PROFILES:
            raise SpecError(f"kernel {self.name}: unknown profile {profile!r}")
        order = PROFILES[: PROFILES.index(profile) + 1][::-1] + PROFILES[PROFILES.index(profile) :]
        return next(p for p in order if p in self.matrix)

    def cases(self, profile: str) -> list[Case]:
        """The profile's cases in declaration order (points outer, then dtypes, modes
        inner); an undeclared profile uses ``profile_for``'s stand-in."""
        name = self.profile_for(profile)
        prof, modes = self.matrix[name], self.profile_modes(name)
        return [Case(self.name, p, d, m) for p in prof.points for d in prof.dtypes for m in modes]

    def case_from_shape(self, shape: Sequence[int], dtype: str, mode: Mode = "forward") -> Case:
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
        if mode not in self.modes:
            raise SpecError(f"kernel {self.name}: no mode {mode!r} (modes: {self.modes})")
        ordered = {k: params[k] for k in keys}
        MatrixProfile((ordered,), (dtype,))  # validates the values
        return Case(self.name, ordered, dtype, mode)
