"""A SPEC as plain data, and a stand-in rebuilt from it: what the orchestrating process
knows of a kernel without importing its module.

Kernel code runs only in worker processes (docs/ARCHITECTURE.md, "Kernel code only in
workers"): a worker imports the kernel module, ``describe`` turns its SPEC into JSON, and
the parent rebuilds a ``KernelSpec`` from it with ``stand_in``. The stand-in keeps every
value the parent reads (name, version, matrix, tolerances, modes, implementations' names,
interpret choice) and checks them as the real SPEC does; each callable is an ``InWorker``
that raises when called, so a path that would run kernel code in the parent fails loudly in
the tests instead of quietly running it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ci_bench.contract.spec import KernelSpec, MatrixProfile, Tolerance

# Callables of the SPEC: present (a stand-in) or absent (None) in the description.
_OPTIONAL_CALLABLES = ("backward_flops", "backward_bytes", "input_specs")


@dataclass(frozen=True)
class InWorker:
    """A SPEC's callable seen from the orchestrating process: it only runs in a worker."""

    kernel: str
    what: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"kernel {self.kernel}: {self.what} runs only in a worker process (ci-bench bug: "
            "the orchestrating process must not execute kernel code)"
        )


def _tolerances(table: Mapping[str, Tolerance] | None) -> dict[str, list[float]] | None:
    return None if table is None else {d: [t.atol, t.rtol] for d, t in table.items()}


def describe(spec: KernelSpec) -> dict[str, Any]:
    """The SPEC's values as JSON-able data (its callables by name only)."""
    return {
        "name": spec.name,
        "version": spec.version,
        "tolerances": _tolerances(spec.tolerances),
        "grad_tolerances": _tolerances(spec.grad_tolerances),
        "matrix": {
            name: {
                "points": [dict(p) for p in prof.points],
                "dtypes": list(prof.dtypes),
                "modes": list(prof.modes) if prof.modes is not None else None,
            }
            for name, prof in spec.matrix.items()
        },
        "shape_keys": list(spec.shape_keys),
        "shape_defaults": dict(spec.shape_defaults),
        "description": spec.description,
        "compute_unit": spec.compute_unit,
        "modes": list(spec.modes),
        "variants": list(spec.variants),
        "subject": spec.subject,
        "baseline": spec.baseline,
        "input_names": list(spec.input_names),
        "grad_inputs": list(spec.grad_inputs) if spec.grad_inputs is not None else None,
        "cpu_interpret": spec.cpu_interpret,
        "callables": [n for n in _OPTIONAL_CALLABLES if getattr(spec, n) is not None],
        "tunable": spec.tunables is not None,
    }


def _table(raw: Mapping[str, list[float]] | None) -> dict[str, Tolerance] | None:
    return None if raw is None else {d: Tolerance(*v) for d, v in raw.items()}


def stand_in(data: Mapping[str, Any]) -> KernelSpec:
    """A KernelSpec with the described values, checked by the SPEC's own rules (a
    ``SpecError`` for a bad one); its callables are ``InWorker``s."""
    name = str(data["name"])

    def runs(what: str) -> InWorker:
        return InWorker(name, what)

    optional = {n: runs(n) if n in data["callables"] else None for n in _OPTIONAL_CALLABLES}
    matrix = {
        profile: MatrixProfile(
            tuple(p["points"]), tuple(p["dtypes"]), tuple(p["modes"]) if p["modes"] else None
        )
        for profile, p in data["matrix"].items()
    }
    grad_inputs = data["grad_inputs"]
    return KernelSpec(
        name=name,
        version=data["version"],
        pallas=runs("pallas"),
        native=runs("native"),
        reference=runs("reference"),
        make_inputs=runs("make_inputs"),
        flops=runs("flops"),
        bytes_accessed=runs("bytes_accessed"),
        tolerances=_table(data["tolerances"]) or {},
        matrix=matrix,
        shape_keys=tuple(data["shape_keys"]),
        shape_defaults=dict(data["shape_defaults"]),
        description=data["description"],
        compute_unit=data["compute_unit"],
        modes=tuple(data["modes"]),
        variants={v: runs(f"variant {v}") for v in data["variants"]},
        subject=data["subject"],
        baseline=data["baseline"],
        grad_tolerances=_table(data["grad_tolerances"]),
        input_names=tuple(data["input_names"]),
        grad_inputs=tuple(grad_inputs) if grad_inputs is not None else None,
        cpu_interpret=data["cpu_interpret"],
        **optional,
    )


def is_stand_in(spec: KernelSpec) -> bool:
    """Whether ``spec`` was rebuilt from a description (its code lives in a worker)."""
    return isinstance(spec.pallas, InWorker)
