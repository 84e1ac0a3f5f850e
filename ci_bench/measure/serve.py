"""The worker process's side of ``measure.workers`` and ``measure.kernel_process``: set up
once, then answer one JSON line per request on its own stdout (fd 1 points at stderr, so a
kernel's prints cannot corrupt the protocol): a case measured (head alone or head and base
as a pair), or a call of kernel code before measuring (describe, trace, model, lower).

It exits through Python's shutdown on SIGTERM (the accelerator's runtime releases the chip)
and dies with its parent if the parent is killed outright.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ci_bench.contract.spec import Case
from ci_bench.measure.kernel_process import PARENT_ENV, answered_by
from ci_bench.measure.workers import WorkerSetup
from ci_bench.schema import CaseResult, DeviceFingerprint


def serve() -> None:
    """Worker entry point: set up once, then measure one case per line until EOF."""
    import faulthandler

    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # prints, from Python or C, go to stderr
    sys.stdout = sys.stderr
    faulthandler.enable()  # a segfault leaves its stack on stderr for the parent
    _stop_cleanly_on_sigterm()
    measure: Callable[[dict[str, Any]], CaseResult] | None = None
    for line in sys.stdin:
        message = json.loads(line)
        if "exit" in message:
            return
        if "call" in message:  # kernel code before (or instead of) measuring
            proto.write(json.dumps(answer(message)) + "\n")
            continue
        if "setup" in message:
            measure = _worker(WorkerSetup(**message["setup"]))
            proto.write(json.dumps({"ready": True}) + "\n")
            continue
        assert measure is not None
        results = measure(message)
        measured = {"results": [r.model_dump(mode="json") for r in results]}
        proto.write(json.dumps(measured) + "\n")


def _stop_cleanly_on_sigterm() -> None:
    """SIGTERM (the parent stopping a busy worker) exits through Python's own shutdown, so
    the accelerator's runtime tears down and frees the chip. A worker whose parent dies
    without stopping it (killed outright) is killed by the kernel rather than left holding
    the chip, however stuck it is (Linux's parent-death signal)."""

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        parent = os.environ.get(PARENT_ENV, "")
        if parent.isdigit() and os.getppid() != int(parent):  # gone before the request
            raise SystemExit(128 + signal.SIGTERM)


def answer(message: dict[str, Any]) -> dict[str, Any]:
    """``{"call": "module:function", "args": ...}`` run here; its answer as JSON, or the
    one-line error (``kernel_process`` on the parent's side)."""
    import importlib

    from pydantic_core import to_jsonable_python

    from ci_bench.errors import CiBenchError, ExitCode
    from ci_bench.measure.kernel_process import unpack
    from ci_bench.text import one_line

    module, _, name = message["call"].partition(":")
    try:
        function = getattr(importlib.import_module(module), name)
        return {"answer": to_jsonable_python(function(*unpack(message["args"])))}
    except CiBenchError as exc:
        return {"error": one_line(str(exc)), "exit": int(exc.exit_code)}
    except Exception as exc:  # the kernel's own exception: said, never a dead worker
        return {"error": one_line(f"{type(exc).__name__}: {exc}"), "exit": ExitCode.INTERNAL}


@contextlib.contextmanager
def calls_in_this_process() -> Iterator[None]:
    """The kernel-code calls answered in this process by ``answer``, through the same
    encoding as to a worker: for a harness that already runs the command line in a process
    of its own choosing (this project's tests, where a worker's start costs seconds a call).
    Nothing in ci-bench uses it; measuring still starts its pool, and a kernel that hangs
    or crashes takes this process with it, so tests of those run ci-bench as a process."""
    with answered_by(answer):
        yield


def _worker(setup: WorkerSetup) -> Callable[[dict[str, Any]], list[CaseResult]]:
    from ci_bench.contract.registry import load_kernels
    from ci_bench.measure.kernel_side import base_isolated
    from ci_bench.measure.roofline import peak_lookup
    from ci_bench.measure.runner import (
        configure_jax,
        harness_settings_from,
        measure_case,
        measure_pair,
    )

    settings = harness_settings_from(setup.settings)
    configure_jax(Path(setup.cache_dir) if setup.cache_dir else None, settings.interpret_mode)
    specs = load_kernels(setup.modules, Path(setup.root) if setup.root else None)
    isolated = None
    if setup.base_root and setup.base_tree and setup.head_tree:
        isolated = base_isolated(
            setup.base_root, setup.base_modules, setup.head_tree, setup.base_tree
        )
        paired = isolated.head(specs)
    device = DeviceFingerprint.model_validate(setup.device)
    peaks = peak_lookup(device.device_kind, device.platform, setup.peak_tflops, setup.peak_gbps)

    def measure(message: dict[str, Any]) -> list[CaseResult]:
        raw = message["case"]
        case = Case(raw["kernel"], raw["params"], raw["dtype"], raw.get("mode", "forward"))
        head = specs[case.kernel]
        if not message.get("pair"):
            return [measure_case(head, case, settings, peaks)]
        seed = message.get("order_seed") or case.id
        assert isolated is not None
        with isolated.sides.held():
            base = isolated.base[case.kernel]
            return measure_pair(paired[case.kernel], base, case, settings, peaks, seed)

    return measure
