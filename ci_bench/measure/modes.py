"""What a case times in each mode: one plain callable and its arguments (a ``Workload``).

- ``forward``: ``impl(*inputs)``.
- ``backward``: the VJP alone. ``jax.vjp`` runs once, compiled, outside the timed region;
  its pullback (a pytree that holds the residuals) is an *argument* of the timed call, so
  residuals are neither recomputed nor baked into the program as constants. The cotangent
  is drawn from the case's seed.
- ``forward+backward``: the forward and the pullback of its output in one call, what a
  training step pays.

A tracer (lowering, ``check-spec``, a grid cost model) gets the same callable with abstract
arguments (``jax.ShapeDtypeStruct``s) from ``case_workload`` and builds no arrays.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from ci_bench.contract.spec import Case, Inputs, KernelSpec, Mode, SpecError, as_inputs

CostSource = Literal["declared", "derived"]

# Cotangents come from their own stream of the case's seed, apart from the inputs'.
COTANGENT_STREAM = 0x6374


@dataclass(frozen=True)
class Workload:
    """``fn(*args)`` is what one timed call runs; args are arrays or ShapeDtypeStructs."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]


def _abstract(tree: Any) -> Any:
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), jnp.result_type(x)), tree)


def abstract_inputs(spec: KernelSpec, case: Case, seed: int = 42) -> Inputs:
    """The case's inputs as ShapeDtypeStructs: the SPEC's ``input_specs`` when declared,
    else ``jax.eval_shape`` of ``make_inputs`` (built only when it cannot be traced)."""
    if spec.input_specs is not None:
        declared = as_inputs(spec.input_specs(case), spec.name)
        for leaf in jax.tree.leaves(declared):
            if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
                raise SpecError(
                    f"kernel {spec.name}: input_specs({case.id}) must give shapes and dtypes "
                    f"(jax.ShapeDtypeStruct), got {type(leaf).__name__}"
                )
        return tuple(_abstract(x) for x in declared)
    key = jax.random.PRNGKey(seed)
    try:
        shapes = jax.eval_shape(lambda k: as_inputs(spec.make_inputs(case, k), spec.name), key)
    except SpecError:
        raise
    except Exception:  # make_inputs not traceable (numpy, Python control flow): build them
        shapes = as_inputs(spec.make_inputs(case, key), spec.name)
    return tuple(_abstract(x) for x in shapes)


def _is_float(tree: Any) -> bool:
    leaves = jax.tree.leaves(tree)
    return bool(leaves) and all(jnp.issubdtype(jnp.result_type(x), jnp.inexact) for x in leaves)


def differentiable(spec: KernelSpec, inputs: Sequence[Any]) -> tuple[int, ...]:
    """Positions of the inputs the backward modes differentiate: the SPEC's
    ``grad_inputs``, else every input whose leaves are all floating point."""
    if spec.grad_inputs is None:
        return tuple(i for i, x in enumerate(inputs) if _is_float(x))
    for i in spec.grad_inputs:
        if not 0 <= i < len(inputs) or not _is_float(inputs[i]):
            raise SpecError(
                f"kernel {spec.name}: grad_inputs names input {i}, which is not one of the "
                f"{len(inputs)} inputs with a floating-point dtype"
            )
    return tuple(spec.grad_inputs)


def input_names(spec: KernelSpec, count: int) -> tuple[str, ...]:
    """Names for messages: the SPEC's ``input_names``, else ``pallas``'s parameters."""
    if spec.input_names:
        if len(spec.input_names) != count:
            raise SpecError(
                f"kernel {spec.name}: input_names has {len(spec.input_names)} names for "
                f"{count} inputs"
            )
        return spec.input_names
    names: list[str] = []
    try:
        params = inspect.signature(spec.pallas).parameters.values()
    except (TypeError, ValueError):  # builtins, some C callables
        params = []
    for p in params:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        names.append(p.name)
    names = names[:count]
    return (*names, *(f"input{i}" for i in range(len(names), count)))


def _over(fn: Callable[..., Any], inputs: Sequence[Any], diff: Sequence[int]):
    """``fn`` as a function of the differentiated inputs only (the others held fixed)."""

    def partial(*grads_of: Any) -> Any:
        full = list(inputs)
        for i, x in zip(diff, grads_of, strict=True):
            full[i] = x
        return fn(*full)

    return partial


def _pullback(fn: Callable[..., Any], diff: Sequence[int]) -> Callable[..., Any]:
    def make(*inputs: Any) -> Any:
        return jax.vjp(_over(fn, inputs, diff), *(inputs[i] for i in diff))[1]

    return make


def apply_pullback(pullback: Any, cotangent: Any) -> Any:
    """The backward mode's timed call: the gradients of the differentiated inputs."""
    return pullback(cotangent)


def forward_backward(fn: Callable[..., Any], diff: Sequence[int]) -> Callable[..., Any]:
    """``step(*inputs, cotangent) -> (output, gradients)``: the forward+backward call."""

    def step(*args: Any) -> Any:
        *inputs, cotangent = args
        out, pull = jax.vjp(_over(fn, inputs, diff), *(inputs[i] for i in diff))
        return out, pull(cotangent)

    step.__name__ = step.__qualname__ = f"forward_backward_{getattr(fn, '__name__', 'fn')}"
    return step


def cotangent_like(out: Any, seed: int) -> Any:
    """A seeded normal cotangent with the output's structure, shapes and dtypes (float0
    zeros for integer outputs, which have no gradient)."""
    leaves, tree = jax.tree.flatten(out)
    keys = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), COTANGENT_STREAM), 1)
    keys = jax.random.split(keys[0], max(1, len(leaves)))
    made = []
    for key, leaf in zip(keys, leaves, strict=False):
        dtype = jnp.result_type(leaf)
        if jnp.issubdtype(dtype, jnp.inexact):
            made.append(jax.random.normal(key, np.shape(leaf), jnp.float32).astype(dtype))
        else:
            made.append(np.zeros(np.shape(leaf), jax.dtypes.float0))
    return jax.tree.unflatten(tree, made)


def cast_like(cotangent: Any, out: Any) -> Any:
    """The cotangent in the dtypes of another implementation's output (same structure)."""
    ct_leaves, ct_tree = jax.tree.flatten(cotangent)
    out_leaves, out_tree = jax.tree.flatten(out)
    if ct_tree != out_tree:
        raise ValueError(f"output structure {out_tree} differs from the subject's {ct_tree}")
    cast = []
    for c, o in zip(ct_leaves, out_leaves, strict=True):
        if np.shape(c) != np.shape(o):
            raise ValueError(f"output shape {np.shape(o)} differs from the subject's {c.shape}")
        dtype = jnp.result_type(o)
        cast.append(c.astype(dtype) if jnp.issubdtype(dtype, jnp.inexact) else c)
    return jax.tree.unflatten(ct_tree, cast)


def as_float32(tree: Any) -> Any:
    """Floating-point leaves in float32 (the reference's precision), others unchanged."""

    def cast(x: Any) -> Any:
        return x.astype(jnp.float32) if jnp.issubdtype(x.dtype, jnp.inexact) else x

    return jax.tree.map(cast, tree)


def workload(
    fn: Callable[..., Any],
    mode: Mode,
    inputs: Sequence[Any],
    diff: Sequence[int],
    cotangent: Any,
) -> Workload:
    """The timed call of one implementation in ``mode``, on concrete or abstract inputs.

    Backward on concrete inputs runs the forward (with its residuals) once here, compiled;
    on abstract inputs it is only traced (``jax.eval_shape``).
    """
    inputs = tuple(inputs)
    if mode == "forward":
        return Workload(fn, inputs)
    if mode == "backward":
        make = _pullback(fn, diff)
        abstract = all(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(inputs))
        pull = jax.eval_shape(make, *inputs) if abstract else jax.jit(make)(*inputs)
        return Workload(apply_pullback, (pull, cotangent))
    return Workload(forward_backward(fn, diff), (*inputs, cotangent))


def mode_costs(
    spec: KernelSpec, case: Case, inputs: Sequence[Any], diff: Sequence[int]
) -> tuple[int, CostSource, int, CostSource]:
    """FLOPs and bytes of one call in the case's mode, each with where it came from.

    ``flops``/``bytes_accessed`` model the forward; a backward call is the SPEC's
    ``backward_flops``/``backward_bytes`` when declared, else derived: FLOPs 2x the forward
    (exact for matmul-like ops: dA and dB are one matmul each), bytes the forward's plus
    one write of every gradient (inputs and the cotangent read, gradients written).
    forward+backward is the sum of both.
    """
    forward = case.with_mode("forward")
    flops, nbytes = int(spec.flops(forward)), int(spec.bytes_accessed(forward))
    if case.mode == "forward":
        return flops, "declared", nbytes, "declared"
    backward = case.with_mode("backward")
    if spec.backward_flops is not None:
        b_flops, flops_source = int(spec.backward_flops(backward)), "declared"
    else:
        b_flops, flops_source = 2 * flops, "derived"
    if spec.backward_bytes is not None:
        b_bytes, bytes_source = int(spec.backward_bytes(backward)), "declared"
    else:
        grads = sum(
            int(np.prod(np.shape(x))) * jnp.dtype(jnp.result_type(x)).itemsize
            for i in diff
            for x in jax.tree.leaves(inputs[i])
        )
        b_bytes, bytes_source = nbytes + grads, "derived"
    if case.mode == "backward":
        return b_flops, flops_source, b_bytes, bytes_source  # type: ignore[return-value]
    return flops + b_flops, flops_source, nbytes + b_bytes, bytes_source  # type: ignore[return-value]


def case_workload(
    spec: KernelSpec,
    case: Case,
    implementation: str | None = None,
    *,
    seed: int = 42,
    inputs: Inputs | None = None,
) -> Workload:
    """What the case times for ``implementation`` (default: the subject), with abstract
    arguments: ``jax.make_jaxpr(w.fn)(*w.args)`` walks exactly the timed pallas_calls
    (a backward case: the backward kernels only). Builds no arrays; ``inputs`` (from
    ``abstract_inputs``) saves tracing them again."""
    name = implementation or spec.subject
    if name not in spec.implementations:
        raise SpecError(f"kernel {spec.name}: no implementation {name!r}")
    fn = spec.implementations[name]
    inputs = abstract_inputs(spec, case, seed) if inputs is None else tuple(inputs)
    if case.mode == "forward":
        return Workload(fn, inputs)
    diff = differentiable(spec, inputs)
    if not diff:
        raise SpecError(f"kernel {spec.name}: mode {case.mode} needs a floating-point input")
    cotangent = _abstract(jax.eval_shape(fn, *inputs))
    return workload(fn, case.mode, inputs, diff, cotangent)


def concrete_workload(
    spec: KernelSpec, case: Case, implementation: str | None = None, *, seed: int = 42
) -> Workload:
    """``case_workload`` on the inputs ``make_inputs`` builds (PRNGKey(seed)): what a
    profiler or an HLO dump runs for the case (a backward case: its VJP alone)."""
    fn = spec.implementations[implementation or spec.subject]
    inputs = as_inputs(spec.make_inputs(case, jax.random.PRNGKey(seed)), spec.name)
    if case.mode == "forward":
        return Workload(fn, inputs)
    diff = differentiable(spec, inputs)
    if not diff:
        raise SpecError(f"kernel {spec.name}: mode {case.mode} needs a floating-point input")
    cotangent = cotangent_like(jax.eval_shape(fn, *inputs), seed)
    return workload(fn, case.mode, inputs, diff, cotangent)
