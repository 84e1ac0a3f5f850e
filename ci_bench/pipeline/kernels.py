"""The kernels of each side as the orchestrating process knows them: described by a worker
(``measure.kernel_process``), never imported here.

The head's SPECs are described by the process that then becomes the first measuring worker
(it is pinned to the first accelerator, so nothing else takes the chip); a command that
only traces or models (``analyze``, the lowering check) gets one told to use the CPU. The
base's kernels are described, traced and modelled in the same process, beside the head's
(``contract.isolation``). Every call has the case time limit; a failure is a
``KernelCodeError`` said to be the side's ("the merge base's kernel module hung while
imported (timed out after 20 s)").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ci_bench.contract.described import stand_in
from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.errors import CiBenchError, InputError, SpecError
from ci_bench.measure.kernel_process import KernelCodeError, KernelProcess
from ci_bench.pipeline.request import Request
from ci_bench.schema import DeviceFingerprint

HEAD = "the head's"
_SIDE = "ci_bench.measure.kernel_side"


@dataclass
class HeadKernels:
    """The head's SPECs (stand-ins), the process that holds their code, the device."""

    specs: Mapping[str, KernelSpec]
    process: KernelProcess
    device: DeviceFingerprint | None
    # Each kernel's module, as the config or --kernel-module names it.
    origin: Mapping[str, str] = field(default_factory=dict)


def read_device(env: Mapping[str, str]) -> DeviceFingerprint:
    """The host's device fingerprint: read in a child where the host has an accelerator, so
    this process never holds one; here on a CPU-only host."""
    from ci_bench.measure.workers import WorkerError, accelerator_present, probe

    try:
        if accelerator_present(env):
            return probe(env)
    except WorkerError as exc:
        raise InputError(str(exc)) from None
    from ci_bench.measure.devices import fingerprint

    return fingerprint()


def _stand_ins(described: Mapping[str, tuple[str, dict[str, Any]]]) -> dict[str, KernelSpec]:
    specs = {}
    for name, (module, data) in described.items():
        try:
            specs[name] = stand_in(data)
        except SpecError as exc:  # the worker built it, so only a version skew lands here
            raise InputError(f"kernel module {module}: {exc}") from None
    return specs


def describe_head(
    process: KernelProcess, request: Request, origin: dict[str, str] | None = None
) -> dict[str, KernelSpec]:
    """Each of the request's kernel modules imported in ``process``: their SPECs (and, in
    ``origin``, each kernel's module)."""
    if not request.modules:
        raise InputError("no kernels configured: add kernels to [tool.ci-bench] or --kernel-module")
    root = str(request.config.root)
    described: dict[str, tuple[str, dict[str, Any]]] = {}
    for module in request.modules:
        try:
            answer = process.call(
                f"{_SIDE}:describe_module",
                module,
                root,
                what=f"kernel module {module}",
                doing="imported",
            )
        except KernelCodeError as exc:
            raise _as_head(exc) from None
        for name, data in answer.items():
            if name in described:
                raise InputError(
                    f"kernel {name!r} is defined twice ({described[name][0]}, {module})"
                )
            described[name] = (module, data)
    if origin is not None:
        origin.update({name: module for name, (module, _) in described.items()})
    return _stand_ins(described)


def _as_head(exc: KernelCodeError) -> CiBenchError:
    """A head-side failure: a module's own error keeps its words (and exit code); a hang or
    crash is said to be the head's."""
    if exc.how == "failed":
        error = InputError(exc.cause)
        error.exit_code = exc.exit_code
        return error
    return exc.on(HEAD)


def head_kernels(request: Request, env: Mapping[str, str], *, measuring: bool) -> HeadKernels:
    """The head's kernels described by a worker; when ``measuring``, the worker is pinned to
    the first accelerator and the device read first (the pool adopts it)."""
    from ci_bench.measure.workers import pin_env

    device = read_device(env) if measuring else None
    pin = pin_env(device.platform, 0) if device is not None else None
    process = KernelProcess(env, request.workers.case_timeout, pin)
    origin: dict[str, str] = {}
    try:
        specs = describe_head(process, request, origin)
    except BaseException:
        process.close(kill=True)
        raise
    return HeadKernels(MappingProxyType(specs), process, device, MappingProxyType(origin))


def base_side(name: str) -> str:
    """Whose code it is, in a sentence: "the merge base's", "the base (v0.1.0)'s"."""
    return "the merge base's" if name.startswith("merge base") else f"the base ({name})'s"


# The base's checkout as a worker loads it: folder, modules, head tree, base tree.
BaseWhere = tuple[str, tuple[str, ...], str, str]


def describe_base(
    process: KernelProcess, where: BaseWhere, side: str
) -> tuple[dict[str, KernelSpec], dict[str, str]]:
    """The base's SPECs, and its modules that failed while imported (module -> why, said
    to be ``side``'s); a hang or crash is a ``KernelCodeError`` of ``side``."""
    modules = ", ".join(where[1]) or "(none)"
    try:
        answer = process.call(
            f"{_SIDE}:describe_base",
            *where,
            what=f"kernel modules ({modules})",
            doing="imported",
        )
    except KernelCodeError as exc:
        raise exc.on(side) from None
    failed = {
        module: f"{side} kernel module {module} failed while imported ({why})"
        for module, why in answer["failed"].items()
    }
    specs = _stand_ins({name: (modules, data) for name, data in answer["specs"].items()})
    return specs, failed


def trace(
    process: KernelProcess,
    side: str,
    case: Case,
    seed: int,
    chips: Sequence[str],
    *,
    head: tuple[Sequence[str], str] | None = None,
    base: BaseWhere | None = None,
) -> dict[str, Any]:
    """One side's trace of ``case``'s kernel (``kernel_side.trace_side``)."""
    target = ("trace_head", *head) if head is not None else ("trace_base", base)
    try:
        return process.call(
            f"{_SIDE}:{target[0]}",
            *target[1:],
            case,
            seed,
            tuple(chips),
            what=f"kernel {case.kernel}",
            doing="traced",
        )
    except KernelCodeError as exc:
        raise exc.on(side) from None


def leaks(process: KernelProcess, where: BaseWhere, side: str) -> list[str]:
    try:
        return process.call(f"{_SIDE}:base_leaks", where, what="kernel modules", doing="checked")
    except KernelCodeError as exc:
        raise exc.on(side) from None


def root_of(request: Request) -> tuple[tuple[str, ...], str]:
    """The head's modules and project folder, as a worker loads them."""
    return tuple(request.modules), str(request.config.root)
