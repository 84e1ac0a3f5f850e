"""The rule a failed lowering broke, named from jax's own message (pure: text in, text out).

A red check that says *which* rule the kernel broke is fixed in minutes; jax's message is
kept after the name. The messages are jax's (``pallas/triton/lowering.py``,
``mosaic/gpu/core.py``, ``pallas/mosaic_gpu/lowering.py``, ``pallas/mosaic/lowering.py``),
the same in jax 0.10.2 and 0.11 (tests/test_lowering_gpu.py holds one of each).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ci_bench.schema.lowering import LoweringRule


@dataclass(frozen=True)
class Rule:
    name: LoweringRule
    pattern: re.Pattern[str]
    say: Callable[[re.Match[str]], str]


def _smem(found: re.Match[str]) -> str:
    need, have = int(found["need"]), int(found["have"])
    return (
        f"shared memory: the kernel needs {need:,} B per block, the GPU allows {have:,} B "
        f"({need - have:,} B over)"
    )


RULES: tuple[Rule, ...] = (
    Rule(
        "power_of_2",
        re.compile(
            r"whose size is a power of 2\. Encountered an array of shape (?P<shape>\([^)]*\))"
        ),
        lambda m: (
            f"power-of-2 rule (Triton): every array a Triton kernel loads, stores or "
            f"computes must have a power-of-2 number of elements; this one is {m['shape']}"
        ),
    ),
    Rule(
        "shared_memory",
        re.compile(
            r"exceeds available shared memory: "
            r"smem_bytes=(?P<need>\d+) > max_smem_bytes=(?P<have>\d+)"
        ),
        _smem,
    ),
    Rule(
        "unsupported_primitive",
        re.compile(
            r"Unimplemented primitive in Pallas (?P<backend>Triton|Mosaic GPU|TPU) lowering"
            r"(?: for \w+)?:? (?P<prim>[\w-]+(?:\.[\w-]+)*)"
        ),
        lambda m: f"unsupported primitive ({m['backend']}): {m['prim']} has no lowering rule",
    ),
    Rule(
        "tpu_block_shape",
        re.compile(r"divisible by 8 and 128"),
        lambda m: (
            "block-shape rule (Mosaic TPU): the last two block dims must be divisible "
            "by 8 and 128 (or equal the array's)"
        ),
    ),
)


def named(message: str) -> tuple[LoweringRule | None, str]:
    """(the rule jax's ``message`` says was broken, the message prefixed with it); (None,
    the message) when no rule is recognised."""
    for rule in RULES:
        found = rule.pattern.search(message)
        if found:
            return rule.name, f"{rule.say(found)} -- {message}"
    return None, message


# Failures of this host, told only by the traceback (jax's message is empty): a kernel that
# reads the CUDA runtime's version while it traces needs jax's CUDA plugin installed.
HOST_TRACEBACKS = (
    (
        re.compile(r"assert cuda_versions is not None"),
        "the kernel asks the CUDA runtime for its version while tracing "
        "(jax._src.lib.cuda_versions), which only jax's CUDA plugin provides: not installed here",
    ),
)


def host_reason(traceback_text: str) -> str | None:
    """Why the traceback shows a failure of this host rather than of the kernel; None if
    it does not."""
    return next((why for pattern, why in HOST_TRACEBACKS if pattern.search(traceback_text)), None)
