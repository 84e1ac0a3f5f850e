"""The cost model read from the Pallas grid: exact, noise-free signals on any machine.

``analyze_case`` traces a case's Pallas implementation with ``jax.make_jaxpr`` (nothing is
executed), extracts every ``pallas_call`` (``extract``), models the TPU pipeline step by step
(``pipeline``), and sums it per case and per target chip (``case``). Chips come from jax's
own table (``chips``). Method and limits: docs/MODEL.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ci_bench.contract.spec import Case, KernelSpec, as_inputs
from ci_bench.measure.model.layouts import Stored
from ci_bench.schema.model import CaseModel, not_modelled

Clock = Callable[[], float]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:400]


# The most real input bytes the model builds on this machine for index maps or dynamic grids
# that read concrete values (scalar prefetch): past it the case is not modelled, with why.
INPUT_BUDGET_BYTES = 1 << 30


def trace(
    spec: KernelSpec, case: Case, seed: int, *, budget: int = INPUT_BUDGET_BYTES
) -> tuple[Any, Callable[[int], Any]]:
    """What the case times, as a ClosedJaxpr (the subject's forward, or its VJP alone for a
    backward case), and its real inputs on demand: only a value a scalar-prefetch operand,
    a dynamic grid or a dynamic trip count reads makes them built, and never past
    ``budget`` bytes (nothing else is allocated: the trace is abstract)."""
    import jax

    from ci_bench.measure.modes import case_workload

    cpu = jax.devices("cpu")[0]
    built: list[tuple[Any, ...]] = []
    timed = case_workload(spec, case, seed=seed)
    flat, tree = jax.tree.flatten(timed.args)
    closed = jax.make_jaxpr(lambda *xs: timed.fn(*jax.tree.unflatten(tree, xs)))(*flat)

    def past_budget(size: int, what: str) -> ValueError:
        return ValueError(
            f"the model needs {what} (an index map, grid or trip count reads them) and they "
            f"are {size / 2**30:.1f} GiB, past the model's budget of {budget / 2**30:.1f} GiB"
        )

    def make(key: Any) -> list[Any]:
        return jax.tree.leaves(as_inputs(spec.make_inputs(case, key), spec.name))

    def every() -> tuple[Any, ...]:
        if not built:
            size = sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in flat)
            if size > budget:
                raise past_budget(size, "the case's real inputs")
            with jax.default_device(cpu):
                built.append(tuple(make(jax.random.PRNGKey(seed))))
        return built[0]

    def inputs(i: int) -> Any:
        """Input ``i`` alone where jax can build it so (a group-size table, not the
        operands beside it: XLA drops the work no output needs), else every input."""
        if case.mode != "forward":
            raise ValueError(f"a scalar-prefetch operand of a {case.mode} call is not modelled")
        if built:
            return built[0][i]
        size = math.prod(flat[i].shape) * np.dtype(flat[i].dtype).itemsize
        if size > budget:
            raise past_budget(size, f"input {i}'s real values")
        try:
            with jax.default_device(cpu):
                return jax.jit(lambda key: make(key)[i])(jax.random.PRNGKey(seed))
        except Exception:  # make_inputs not traceable (numpy, Python values): build them all
            return every()[i]

    return closed, inputs


def _spec_flops(spec: KernelSpec, case: Case, seed: int) -> int:
    """The SPEC's FLOPs for the case's mode (declared, or derived as the harness does)."""
    if case.mode == "forward":
        return int(spec.flops(case))
    from ci_bench.measure.modes import abstract_inputs, differentiable, mode_costs

    inputs = abstract_inputs(spec, case, seed)
    return mode_costs(spec, case, inputs, differentiable(spec, inputs))[0]


def _chip_queries() -> int | None:
    """How often the chip was asked for in this process (None: unknown): jax's
    ``get_tpu_info()`` and ci-bench's ``this_chip()`` (a kernel reading its tuned config)."""
    from ci_bench.measure.chip import answered_as_chip

    try:
        from jax._src.pallas.mosaic import tpu_info

        info = tpu_info.get_tpu_info.cache_info()  # type: ignore[attr-defined]
        return int(info.hits + info.misses) + answered_as_chip()
    except Exception:  # jax internals moved: every chip is traced
        return None


def _traces(
    names: Sequence[str | None], as_: Callable[[str | None], tuple[str, bool]]
) -> dict[str | None, str]:
    """Each chip's printed jaxpr, tracing as few chips as the kernel allows: when jax asked
    for the chip while tracing the first, every chip is traced; else the last one too, and
    the chips between only when those two differ (a kernel that reads the chip some other
    way, e.g. per-generation block-size tables). Each trace is ~0.1 s of CPU per case."""
    first, asked = as_(names[0])
    texts = {names[0]: first}
    if len(names) == 1:
        return texts
    if not asked:
        last, asked = as_(names[-1])
        texts[names[-1]] = last
        if not asked and last == first:
            return dict.fromkeys(names, first)
    for name in names[1:]:
        if name not in texts:
            texts[name] = as_(name)[0]
    return texts


def analyze_case(
    spec: KernelSpec,
    case: Case,
    chips: Sequence[str],
    *,
    seed: int = 42,
    flops_factor: float = 2.0,
    clock: Clock = time.perf_counter,
    layouts: Stored | None = None,
) -> CaseModel:
    """The case's model on ``chips``, each traced *as that chip* (``aschip``: jax's chip
    queries answer for it; GPUs through ``asgpu`` and ``gpu``); any failure is "not
    modelled: why", never zeros. ``layouts``: how the chip stores the function's inputs and
    outputs (None: this process's TPU's, row-major off a TPU), for every target alike."""
    from ci_bench.schema.chips import split_targets

    tpus, gpus = split_targets(list(chips))
    if gpus:
        from ci_bench.measure.model.gpu_case import with_gpus

        return with_gpus(spec, case, tpus, gpus, seed, flops_factor, clock, analyze_case)
    from ci_bench.measure.chip import stored_layouts
    from ci_bench.measure.model.aschip import as_chip
    from ci_bench.measure.model.case import case_model, merge_chips
    from ci_bench.measure.model.chips import chip
    from ci_bench.measure.model.extract import Scope, walk
    from ci_bench.measure.model.outside import outside_bytes

    start = clock()
    try:
        stored = layouts if layouts is not None else stored_layouts()
        targets = [chip(name) for name in chips]
        # A vector kernel's SPEC FLOPs are VPU work, not MXU: never checked against dots.
        vector = getattr(spec, "compute_unit", "matrix") == "vector"
        spec_flops = _spec_flops(spec, case, seed)
        walks: dict[str, Any] = {}  # the printed jaxpr -> its walk (most kernels ignore the chip)
        outside: dict[str, int] = {}  # the printed jaxpr -> what its XLA operations move
        gpu: list[Any] = []

        def as_(name: str | None) -> tuple[str, bool]:
            """The printed jaxpr traced as ``name`` (walked once per distinct jaxpr), and
            whether jax asked for the chip while tracing it."""
            before = _chip_queries()
            with as_chip(name):
                closed, inputs = trace(spec, case, seed)
                text = str(closed)
                if text not in walks:
                    top = Scope(closed.jaxpr, closed.consts, inputs)
                    walks[text] = walk(closed.jaxpr, top, "tpu")
                    outside[text] = outside_bytes(closed.jaxpr, stored)
                if not gpu:
                    top = Scope(closed.jaxpr, closed.consts, inputs)
                    gpu.append(walk(closed.jaxpr, top, "gpu"))
            return text, before is None or _chip_queries() != before

        names: list[str | None] = [t.name for t in targets] or [None]
        texts = _traces(names, as_)
        per_chip = [
            case_model(
                walks[texts[name]],
                [target] if target else [],
                spec_flops=spec_flops,
                flops_factor=flops_factor,
                gpu=gpu[0],
                check_flops=not vector,
                outside_bytes=outside[texts[name]],
            )
            for name, target in zip(names, targets or [None], strict=True)
        ]
        return merge_chips(per_chip, [t.name for t in targets], (clock() - start) * 1000)
    except Exception as exc:  # the model must never fail a case: its reason is recorded
        return not_modelled(_one_line(exc), (clock() - start) * 1000)
