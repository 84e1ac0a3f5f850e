"""The VMEM Mosaic takes for a kernel body's own values, beyond its blocks and scratch.

A body's vector values live in vector registers (64 of 4 KiB on a TPU); one that does not
fit there is kept in VMEM, in the same scoped allocation as the pipeline's buffers, and so
counts against ``vmem_limit_bytes``. Read from the compiler itself (libtpu's refusals,
``benchmarks/tpu_vmem_probe.py`` and ``tpu_fit_check.py``, compiled for a TPU v5e), two kinds
of value are what a kernel's blocks leave out:

- **a dot accumulated into a ref** (``acc_ref[...] += dot(a, b)``): the MXU adds into the
  accumulator as it goes, but the left operand is staged whole, as bfloat16 (2·m·k bytes:
  the same for float32 operands, which pass the MXU as bfloat16 at DEFAULT precision),
  when the right operand spans more than one of the MXU's 128 x 128 tiles each way and
  more than 2 x 2 of them; a left operand fed past one row or one column of tiles, or
  past a right operand that small, is read from its block as it is (measured, not
  documented by Mosaic: every tiling of the project's matmul, docs/MODEL.md);
- **any other dot**: its float32 result is kept whole for the vector work that reads it
  (attention's scores, 4·m·n bytes).

Within a body nothing is reused: the values of a loop unrolled ``u`` times are counted ``u``
times (jax's flash attention unrolls its inner loop), a loop kept rolled once; of a
conditional's branches, the largest. A value that fits the register file costs nothing.
"""

from __future__ import annotations

from typing import Any

from ci_bench.measure.model.jaxpr_read import dot_dims, padded_bytes, sub_jaxprs

REGISTER_FILE_BYTES = 64 * 4096  # 64 vregs of 8 x 128 x 32 bits
MXU_TILE = 128  # v5e's MXU: 128 x 128
SMALL_RIGHT_OPERAND = 256 * 256  # elements: a right operand the left one streams past
_BF16 = 2
_F32 = 4


def _readers(jaxpr: Any) -> dict[Any, list[Any]]:
    readers: dict[Any, list[Any]] = {}
    for eqn in jaxpr.eqns:
        for var in eqn.invars:
            if not hasattr(var, "val"):
                readers.setdefault(var, []).append(eqn)
    return readers


def _accumulated(eqn: Any, readers: dict[Any, list[Any]]) -> bool:
    """Whether the dot's result is only added to a value and the sum only stored in a ref
    (``swap``): the MXU's accumulate, nothing of the result kept."""
    (out,) = eqn.outvars
    adds = readers.get(out, [])
    if len(adds) != 1 or adds[0].primitive.name != "add":
        return False
    stores = readers.get(adds[0].outvars[0], [])
    return len(stores) == 1 and stores[0].primitive.name == "swap"


def _dot_bytes(eqn: Any, readers: dict[Any, list[Any]]) -> int:
    batch, m, k, n = dot_dims(eqn)
    if _accumulated(eqn, readers):
        staged = k > MXU_TILE and n > MXU_TILE and k * n > SMALL_RIGHT_OPERAND
        kept = batch * padded_bytes((m, k), _BF16) if staged else 0
    else:
        kept = batch * padded_bytes((m, n), _F32)
    return kept if kept > REGISTER_FILE_BYTES else 0


def _unrolled(eqn: Any) -> int:
    """How many copies of a loop's body the compiler sees: a scan unrolled ``u`` times
    (``unroll=True`` is its length), else one."""
    if eqn.primitive.name != "scan":
        return 1
    unroll, length = eqn.params.get("unroll", 1), eqn.params["length"]
    if unroll is True:
        return int(length)
    return max(1, min(int(unroll or 1), int(length)))


def temporaries_bytes(jaxpr: Any) -> int:
    """Bytes of VMEM the body's own values take (the module's docstring)."""
    readers = _readers(jaxpr)
    total = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            total += _dot_bytes(eqn, readers)
            continue
        subs = sub_jaxprs(eqn)
        if not subs:
            continue
        if eqn.primitive.name == "cond":
            total += max(temporaries_bytes(s) for s in subs)
        else:
            total += _unrolled(eqn) * sum(temporaries_bytes(s) for s in subs)
    return total


_LOADS_AND_STORES = ("get", "swap", "addupdate")


def _only_loaded_and_stored(jaxpr: Any, ref: Any) -> bool:
    """Whether ``ref`` is only read and written as a vector in ``jaxpr`` (and in the
    branches of conditionals it is passed to): no copy, loop or pipeline touches it."""
    for eqn in jaxpr.eqns:
        positions = [i for i, v in enumerate(eqn.invars) if v is ref]
        if not positions:
            continue
        name = eqn.primitive.name
        if name in _LOADS_AND_STORES:
            continue
        if name != "cond":
            return False
        for branch in eqn.params["branches"]:
            inner = branch.jaxpr
            for i in positions:  # a cond's operands after the predicate are its branches' invars
                if not _only_loaded_and_stored(inner, inner.invars[i - 1]):
                    return False
    return True


def carries_nothing(grid: tuple[int, ...], semantics: tuple[str, ...] | None) -> bool:
    """Whether no value can pass from one grid step to the next in order: no sequential
    ('arbitrary', or unspecified) grid axis takes more than one step."""
    axes = semantics or ("arbitrary",) * len(grid)
    return all(size <= 1 for size, kind in zip(grid, axes, strict=False) if kind != "parallel")


def scratch_bytes(jaxpr: Any, ref: Any, shape: tuple[int, ...], itemsize: int, local: bool) -> int:
    """A VMEM scratch as Mosaic allocates it: whole, unless the grid carries nothing from
    step to step (``local``) and the body only loads and stores it as a vector. Then it is
    written and read within the step (an accumulator over a reduction of one step) and the
    compiler forwards its stores to its loads, keeping one (rows, 128) float32 column of it:
    the project's bfloat16 matmul with a single k step needs its blocks, less the float32
    accumulator, plus that column (15.48 MiB of 16 counted at (1024, 2048, 256), 2048³)."""
    if not (local and _only_loaded_and_stored(jaxpr, ref)):
        return padded_bytes(shape, itemsize)
    return padded_bytes((*shape[:-1], min(shape[-1], MXU_TILE)), _F32) if shape else 0
