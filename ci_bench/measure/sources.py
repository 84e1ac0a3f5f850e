"""The source files behind a kernel's implementation, read from its trace (nothing runs).

Every operation jax records carries the Python frames that created it; the user's frames
(not jax's, not the standard library's) name the files the traced program came from. Those
of a ``pallas_call`` (where it is called, and every operation of its kernel body) are the
kernel's own files: if the base and the head of an A/B traced their kernels from the same
file, the pair compared that code with itself (``pipeline.sources`` judges it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci_bench.contract.spec import Case, KernelSpec

_OURS = str(Path(__file__).resolve().parents[1]) + os.sep


@dataclass(frozen=True)
class Traced:
    """Files (real paths) a trace's operations came from; ``kernel``: the Pallas kernels'
    own (their bodies and call sites); ``error``: why there is no trace; ``modules``: each
    file's path below its import root, read in the process that traced it."""

    files: frozenset[str] = field(default_factory=frozenset)
    kernel: frozenset[str] = field(default_factory=frozenset)
    error: str | None = None
    modules: Mapping[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "files": sorted(self.files),
            "kernel": sorted(self.kernel),
            "error": self.error,
            "modules": dict(self.modules),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Traced:
        return cls(
            frozenset(data["files"]), frozenset(data["kernel"]), data["error"], data["modules"]
        )


def _frames(eqn: Any) -> list[str]:
    from jax._src import source_info_util

    files = []
    for frame in source_info_util.user_frames(eqn.source_info.traceback):
        name = os.path.realpath(frame.file_name)
        if not name.startswith(_OURS):  # ci-bench's own harness frames: shared, not the kernel
            files.append(name)
    return files


def _walk(jaxpr: Any, in_kernel: bool, files: set[str], kernel: set[str]) -> None:
    from jax.extend.core import jaxprs_in_params

    for eqn in jaxpr.eqns:
        pallas = eqn.primitive.name == "pallas_call"
        frames = _frames(eqn)
        files.update(frames)
        if (pallas or in_kernel) and frames:
            kernel.add(frames[0])  # the innermost user frame: the kernel's own line
        for inner in jaxprs_in_params(eqn.params):
            _walk(inner, in_kernel or pallas, files, kernel)


def traced_files(spec: KernelSpec, case: Case, seed: int, chips: Sequence[str] = ()) -> Traced:
    """The files ``spec``'s subject is traced from on ``case`` (as the host, else as each of
    ``chips`` in turn for a kernel that asks for its TPU chip while tracing)."""
    from ci_bench.measure.model import trace
    from ci_bench.measure.model.aschip import as_chip

    error = "not traced"
    for chip in (None, *chips):
        try:
            with as_chip(chip):
                closed, _ = trace(spec, case, seed)
            files: set[str] = set()
            kernel: set[str] = set()
            _walk(closed.jaxpr, False, files, kernel)
            return Traced(frozenset(files), frozenset(kernel))
        except Exception as exc:  # a trace that fails is the A/B's own error, not this check's
            error = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    return Traced(error=error)
