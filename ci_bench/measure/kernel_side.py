"""What a worker does with kernel code for the orchestrating process (``kernel_process``):
import a side's kernel modules and describe their SPECs, trace a kernel for the A/B's
source proof, model a case. Each function is one call, so its caller names what hung or
crashed; the arguments and answers are plain values.

The head's modules are imported as the measuring worker imports them; the base's beside
them through ``contract.isolation``, once per process (the measuring pool reuses them).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ci_bench.contract.described import describe
from ci_bench.contract.registry import Isolated, load_isolated, load_kernels
from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.schema.model import CaseModel

# The base loaded in this process, once, by its checkout's folder: its Isolated and the
# modules that could not be imported there (module -> the one-line error).
_BASES: dict[str, tuple[Isolated, dict[str, str]]] = {}


def forget_bases() -> None:
    """The bases loaded so far dropped (a process that answers several commands' calls)."""
    _BASES.clear()


def head_specs(modules: Sequence[str], root: str | None) -> dict[str, KernelSpec]:
    return dict(load_kernels(modules, Path(root) if root else None))


def describe_module(module: str, root: str | None) -> dict[str, dict[str, Any]]:
    """One kernel module imported (the head's): its SPECs described."""
    return {name: describe(spec) for name, spec in head_specs([module], root).items()}


def base_isolated(folder: str, modules: Sequence[str], head_tree: str, base_tree: str) -> Isolated:
    """The base's modules imported beside the head's, once per process (a module that
    cannot be imported is left out; ``describe_base`` says which)."""
    if folder not in _BASES:
        failures: dict[str, str] = {}
        isolated = load_isolated(
            Path(folder),
            modules,
            head_tree=Path(head_tree),
            base_tree=Path(base_tree),
            failures=failures,
        )
        _BASES[folder] = (isolated, failures)
    return _BASES[folder][0]


def describe_base(
    folder: str, modules: Sequence[str], head_tree: str, base_tree: str
) -> dict[str, Any]:
    """The base's kernel modules imported from its checkout: its SPECs described, and the
    modules that could not be imported (module -> why)."""
    isolated = base_isolated(folder, modules, head_tree, base_tree)
    return {
        "specs": {name: describe(spec) for name, spec in isolated.base.items()},
        "failed": dict(_BASES[folder][1]),
    }


def _module_path(file: str) -> str | None:
    """Where a loaded module's file sits below its import root (``mylib/kernels/x.py``)."""
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None)
        if isinstance(where, str) and os.path.realpath(where) == file:
            tail = "/__init__.py" if where.endswith("__init__.py") else Path(where).suffix
            return name.replace(".", "/") + tail
    return None


def profile_head(
    modules: Sequence[str],
    root: str | None,
    kernel: str,
    case_id: str,
    out_dir: str,
    runs: int,
    seed: int,
    values: dict[str, Any],
) -> dict[str, Any]:
    """``ci-bench profile``: one case of the head's kernel traced here (this process was
    started with libtpu's metric flags where the host has a TPU); where the files went."""
    from ci_bench.measure.profiling import trace_case

    spec = head_specs(modules, root)[kernel]
    return trace_case(spec, case_id, Path(out_dir), runs=runs, seed=seed, values=values).as_json()


def profile_base(
    where: tuple[str, Sequence[str], str, str],
    kernel: str,
    case_id: str,
    out_dir: str,
    runs: int,
    seed: int,
) -> dict[str, Any]:
    """The A/B's unit-metrics pass: one case of the base's kernel traced here."""
    from ci_bench.measure.profiling import trace_case

    spec = base_isolated(*where).base[kernel]
    return trace_case(spec, case_id, Path(out_dir), runs=runs, seed=seed).as_json()


def trace_side(spec: KernelSpec, case: Case, seed: int, chips: Sequence[str]) -> dict[str, Any]:
    """The files ``spec``'s subject is traced from (``measure.sources``), with each file's
    path below its import root (the installed-copy check needs this process's modules)."""
    from dataclasses import replace

    from ci_bench.measure.sources import traced_files

    found = traced_files(spec, case, seed, chips)
    below = {f: m for f in found.files if (m := _module_path(f)) is not None}
    return replace(found, modules=below).as_json()


def trace_head(
    modules: Sequence[str], root: str | None, case: Case, seed: int, chips: Sequence[str]
) -> dict[str, Any]:
    return trace_side(head_specs(modules, root)[case.kernel], case, seed, chips)


def trace_base(
    where: tuple[str, Sequence[str], str, str], case: Case, seed: int, chips: Sequence[str]
) -> dict[str, Any]:
    isolated = base_isolated(*where)
    return trace_side(isolated.base[case.kernel], case, seed, chips)


def base_leaks(where: tuple[str, Sequence[str], str, str]) -> list[str]:
    """Head modules the base's code imported past the finder (none, unless a bug)."""
    return sorted(base_isolated(*where).leaks)


def model_head(
    modules: Sequence[str],
    root: str | None,
    chips: Sequence[str],
    seed: int,
    factor: float,
    case: Case,
) -> CaseModel:
    from ci_bench.measure.model import analyze_case

    spec = head_specs(modules, root)[case.kernel]
    return analyze_case(spec, case, chips, seed=seed, flops_factor=factor)


def model_base(
    where: tuple[str, Sequence[str], str, str],
    chips: Sequence[str],
    seed: int,
    factor: float,
    case: Case,
) -> CaseModel:
    from ci_bench.measure.model import analyze_case

    spec = base_isolated(*where).base[case.kernel]
    return analyze_case(spec, case, chips, seed=seed, flops_factor=factor)


def model_base_as_run(
    where: tuple[str, Sequence[str], str, str], seed: int, factor: float, case: Case
) -> CaseModel:
    """The base's case modelled on the chips a run models it on (``runner.model_chips``):
    what ``ci-bench remodel`` writes back into a baseline entry in place of a run's."""
    from ci_bench.measure.runner import model_chips

    return model_base(where, model_chips(), seed, factor, case)


def lower_case(
    modules: Sequence[str],
    root: str | None,
    platform: str,
    chips: Sequence[str],
    seed: int,
    factor: float,
    case: Case,
) -> tuple[Any, CaseModel | None]:
    """The head's case lowered for ``platform`` as each of ``chips`` and, for TPU, its cost
    model (the parent checks the VMEM fit)."""
    from ci_bench.measure.lowering import lower_for_chips
    from ci_bench.measure.model import analyze_case

    spec = head_specs(modules, root)[case.kernel]
    lowered = lower_for_chips(spec, case, platform, chips, seed)  # type: ignore[arg-type]
    if platform != "tpu":
        return lowered, None
    return lowered, analyze_case(spec, case, chips, seed=seed, flops_factor=factor)
