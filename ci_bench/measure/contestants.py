"""Who is timed in a case, and the correctness gate each must pass first.

The lineup: every spec's subject (head and base in an A/B run), in a one-spec run the
kernel's other implementations, then the baseline. Every contestant but the baseline is
checked against the first spec's float32 reference: outputs, and in the backward modes the
gradient of every differentiated input against ``jax.vjp`` of the reference.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import jax

from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.measure.correctness import (
    check_gradient,
    check_output,
    float32_floor,
    incorrect,
    incorrect_gradients,
)
from ci_bench.measure.modes import Workload, as_float32, cast_like, forward_backward, input_names
from ci_bench.schema import CompiledStats, Correctness

Role = Literal["subject", "other", "baseline"]


@dataclass(frozen=True)
class Expected:
    """What the checked implementations must give: from the float32 reference."""

    output: Any | None  # forward and forward+backward
    gradients: tuple[Any, ...] | None  # backward modes, one per differentiated input
    names: tuple[str, ...]  # of the differentiated inputs


@dataclass
class Contestant:
    """One implementation timed in a case: the subject of ``specs[spec]``, another
    implementation, or the baseline (which alone skips the correctness gate)."""

    spec: int
    name: str
    fn: Callable[..., Any]
    role: Role
    work: Workload | None = None
    exe: Any = None
    compile_ms: float | None = None
    stats: CompiledStats | None = None
    correctness: Correctness | None = None
    gradients: dict[str, Correctness] = field(default_factory=dict)

    def label(self, message: str) -> str:
        return message if self.role != "other" else f"{self.name}: {message}"


def lineup(specs: Sequence[KernelSpec]) -> list[Contestant]:
    """Every spec's subject (head and base in A/B); in a one-spec run its other
    implementations too; then the first spec's baseline."""
    first = specs[0]
    people = [
        Contestant(i, s.subject, s.implementations[s.subject], "subject")
        for i, s in enumerate(specs)
    ]
    if len(specs) == 1:
        people += [Contestant(0, n, first.implementations[n], "other") for n in first.others]
    people.append(Contestant(0, first.baseline, first.implementations[first.baseline], "baseline"))
    return people


def expected(
    spec: KernelSpec, case: Case, inputs: Sequence[Any], diff: Sequence[int], ct: Any
) -> Expected:
    names = input_names(spec, len(inputs))
    if case.mode == "forward":
        out = jax.block_until_ready(jax.jit(spec.reference)(*inputs))
        return Expected(out, None, ())
    inputs32 = as_float32(tuple(inputs))
    ct32 = cast_like(ct, jax.eval_shape(spec.reference, *inputs32))
    out, grads = jax.block_until_ready(
        jax.jit(forward_backward(spec.reference, diff))(*inputs32, ct32)
    )
    keep = out if case.mode == "forward+backward" else None
    return Expected(keep, tuple(grads), tuple(names[i] for i in diff))


def check(spec: KernelSpec, case: Case, c: Contestant, got: Any, want: Expected) -> str | None:
    """Record the contestant's output and gradient checks; the error message, if wrong."""
    problems = []
    floor = float32_floor(case.dtype, jax.default_backend())
    if case.mode != "backward":
        output = got if case.mode == "forward" else got[0]
        c.correctness = check_output(output, want.output, spec.tolerance(case.dtype), floor)
        if not c.correctness.ok:
            problems.append(incorrect(c.correctness))
    if case.mode != "forward":
        grads = got if case.mode == "backward" else got[1]
        tol = spec.tolerance(case.dtype, gradient=True)
        assert want.gradients is not None
        c.gradients = {
            name: check_gradient(g, r, tol, floor)
            for name, g, r in zip(want.names, grads, want.gradients, strict=True)
        }
        wrong = incorrect_gradients(c.gradients)
        if wrong:
            problems.append(wrong)
    return c.label(" | ".join(problems)) if problems else None
