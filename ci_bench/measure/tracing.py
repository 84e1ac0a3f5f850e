"""``check-spec``'s tracing pass: every case of every profile traced, no array built.

A SPEC whose kernel cannot even trace on one of its cases (a shape its block sizes do not
take, a backward with no VJP rule, a variant with another output) must fail ``check-spec``,
not the benchmark job. Each case's inputs are abstract (the SPEC's ``input_specs``, or
``jax.eval_shape`` of ``make_inputs``) and every implementation's timed call in the case's
mode is traced with ``jax.eval_shape``, as is the reference.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import jax

from ci_bench.contract.spec import PROFILES, Case, KernelSpec, as_inputs
from ci_bench.measure.modes import abstract_inputs, case_workload, differentiable, mode_costs
from ci_bench.text import one_line


def _shapes(tree: Any, dtypes: bool = True) -> str:
    """A tree's structure, leaf shapes and (optionally) dtypes, as comparable text."""
    leaves, treedef = jax.tree.flatten(tree)
    shown = [
        f"{x.dtype}[{','.join(map(str, x.shape))}]"
        if dtypes
        else f"[{','.join(map(str, x.shape))}]"
        for x in leaves
    ]
    body = ", ".join(shown)
    return body if treedef.num_leaves == 1 and treedef == jax.tree.structure(0) else f"({body})"


def _traced(fn: Callable[..., Any], args: Any) -> Any:
    return jax.eval_shape(fn, *args)


def unique_cases(spec: KernelSpec) -> list[Case]:
    """Every case of every declared profile, once, smallest profile first."""
    seen: dict[str, Case] = {}
    for profile in (p for p in PROFILES if p in spec.matrix):
        for case in spec.cases(profile):
            seen.setdefault(case.id, case)
    return list(seen.values())


def _declared_matches_made(spec: KernelSpec, case: Case, seed: int) -> str | None:
    """Declared ``input_specs`` must describe what ``make_inputs`` builds."""
    if spec.input_specs is None:
        return None
    declared = _shapes(abstract_inputs(spec, case, seed))
    try:
        made = jax.eval_shape(
            lambda k: as_inputs(spec.make_inputs(case, k), spec.name), jax.random.PRNGKey(seed)
        )
    except Exception:  # not traceable: make_inputs is checked where it runs
        return None
    if _shapes(made) != declared:
        return f"{case.id}: input_specs {declared} differ from make_inputs' {_shapes(made)}"
    return None


def case_problems(spec: KernelSpec, case: Case, seed: int = 42) -> list[str]:
    """What keeps one case from tracing, one line each (empty: every implementation and
    the reference trace in the case's mode, with the same output)."""
    problems: list[str] = []
    try:
        inputs = abstract_inputs(spec, case, seed)
    except Exception as exc:  # the finding: reported, never raised
        return [f"{case.id}: inputs: {one_line(exc)}"]
    outputs: dict[str, str] = {}
    abstract_out: dict[str, Any] = {}
    for name in [spec.subject, *(n for n in spec.implementations if n != spec.subject)]:
        try:
            work = case_workload(spec, case, name, seed=seed, inputs=inputs)
            abstract_out[name] = _traced(work.fn, work.args)
            outputs[name] = _shapes(abstract_out[name])
        except Exception as exc:
            problems.append(f"{case.id}: {name} ({case.mode}) cannot trace: {one_line(exc)}")
    try:
        reference = _traced(spec.reference, inputs)
    except Exception as exc:
        problems.append(f"{case.id}: reference cannot trace: {one_line(exc)}")
        reference = None
    if case.mode == "forward" and reference is not None and spec.subject in abstract_out:
        want, got = _shapes(reference, False), _shapes(abstract_out[spec.subject], False)
        if got != want:
            problems.append(f"{case.id}: {spec.subject} gives {got}, the reference {want}")
    for name, shapes in outputs.items():
        if name != spec.subject and spec.subject in outputs and shapes != outputs[spec.subject]:
            problems.append(
                f"{case.id}: {name} gives {shapes}, the subject {spec.subject} "
                f"{outputs[spec.subject]}"
            )
    if case.mode != "forward":
        try:
            mode_costs(spec, case, inputs, differentiable(spec, inputs))
        except Exception as exc:
            problems.append(f"{case.id}: the {case.mode} cost model: {one_line(exc)}")
    mismatch = _declared_matches_made(spec, case, seed)
    if mismatch:
        problems.append(mismatch)
    return problems


def trace_problems(
    spec: KernelSpec, seed: int = 42, cases: Iterable[Case] | None = None, limit: int = 5
) -> list[str]:
    """``case_problems`` over every case (``unique_cases`` unless given); beyond ``limit``
    findings the rest are counted, not listed."""
    found = [
        p
        for case in (cases if cases is not None else unique_cases(spec))
        for p in case_problems(spec, case, seed)
    ]
    if len(found) > limit:
        return [*found[:limit], f"{len(found) - limit} more tracing problems like these"]
    return found
