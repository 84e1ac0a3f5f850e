"""``ci-bench check-spec``: validate a SPEC without running a kernel.

``KernelSpec`` already refuses a bad name, version, matrix or tolerance when it is built;
this adds what only shows across the matrix: the callables are callable, every dtype has a
tolerance, the FLOPs and bytes models (forward, and backward where declared) answer on
every case with a non-negative int, and case ids are unique. Pure: nothing is imported,
traced or run but the cost models; the tracing pass is ``ci_bench.measure.tracing``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ci_bench.contract.spec import PROFILES, KernelSpec, Tolerance

CALLABLES = ("pallas", "native", "reference", "make_inputs", "flops", "bytes_accessed")
OPTIONAL_CALLABLES = ("backward_flops", "backward_bytes", "input_specs")


def _model_problem(name: str, fn: Callable[..., Any], case: Any) -> str | None:
    try:
        value = fn(case)
    except Exception as exc:  # the finding: reported, never raised
        return f"{name}({case.id}) raised {type(exc).__name__}: {exc}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{name}({case.id}) returned {type(value).__name__}, expected an int"
    if not math.isfinite(value) or value < 0 or value != int(value):
        return f"{name}({case.id}) returned {value!r}, expected a non-negative int"
    return None


def spec_problems(spec: KernelSpec, max_per_model: int = 3) -> list[str]:
    """Every broken rule of the contract, one line each; empty when the SPEC is sound."""
    problems = [
        f"{field} is not callable ({type(getattr(spec, field)).__name__})"
        for field in CALLABLES
        if not callable(getattr(spec, field))
    ]
    problems += [
        f"{field} is not callable ({type(getattr(spec, field)).__name__})"
        for field in OPTIONAL_CALLABLES
        if getattr(spec, field) is not None and not callable(getattr(spec, field))
    ]
    problems += [
        f"variants[{name!r}] is not callable ({type(fn).__name__})"
        for name, fn in spec.variants.items()
        if not callable(fn)
    ]
    for dtype, tol in spec.tolerances.items():
        if not isinstance(tol, Tolerance):
            problems.append(f"tolerances[{dtype!r}] is {type(tol).__name__}, not a Tolerance")
    if not isinstance(spec.shape_keys, tuple) or not all(
        isinstance(k, str) for k in spec.shape_keys
    ):
        problems.append("shape_keys must be a tuple of parameter names")
    for profile in (p for p in PROFILES if p in spec.matrix):
        cases = spec.cases(profile)
        keys = {tuple(c.params) for c in cases}
        if len(keys) > 1:
            problems.append(f"profile {profile}: points differ in their keys {sorted(keys)}")
        for key in (*spec.shape_keys, *spec.shape_defaults):
            if cases and key not in cases[0].params:
                problems.append(f"profile {profile}: shape key {key!r} is not a parameter")
        ids = [c.id for c in cases]
        for dup in sorted({i for i in ids if ids.count(i) > 1}):
            problems.append(f"profile {profile}: case id {dup} appears twice")
        for dtype in spec.matrix[profile].dtypes:
            if dtype not in spec.tolerances:
                problems.append(f"profile {profile}: no tolerance for dtype {dtype}")
        forward = list({c.with_mode("forward").id: c.with_mode("forward") for c in cases}.values())
        backward = list(
            {
                c.with_mode("backward").id: c.with_mode("backward")
                for c in cases
                if c.mode != "forward"
            }.values()
        )
        models = [("flops", forward), ("bytes_accessed", forward)]
        models += [("backward_flops", backward), ("backward_bytes", backward)]
        for name, on in models:
            fn = getattr(spec, name)
            if not callable(fn):
                continue
            found = [m for c in on if (m := _model_problem(name, fn, c))]
            problems += found[:max_per_model]
            if len(found) > max_per_model:
                problems.append(f"{name}: {len(found) - max_per_model} more cases like these")
    return list(dict.fromkeys(problems))
