"""How much VMEM Mosaic needs for a tiling of the project's matmul: the chip's own answer.

Issue 51 asks the model's VMEM fit to agree with the compiler on every tiling. The sweep
(``tpu_matmul_sweep.py``) says only fits or not at the default 16 MiB scoped limit; this
script reads, per tiling, the scoped VMEM Mosaic allocates (a refusal names the allocation
that passed ``vmem_limit_bytes``; the limit is raised to each figure named until it
compiles, and one step below the last is checked to refuse), so the model's count can be
set against the compiler's need.

On a TPU host, from the repository's root (output ``OUT/vmem_probe.json``):

    python benchmarks/tpu_vmem_probe.py --out "$OUT" --deadline 150
    python benchmarks/tpu_vmem_probe.py --set narrow --out "$OUT" --deadline 150
    python benchmarks/tpu_vmem_probe.py --render benchmarks/data/<probe>.json   # any host

On any host with libtpu installed (``pip install 'jax[tpu]'``; no TPU needed), the same
compiler answers for a chip named by ``--deviceless`` (see ``tpu_deviceless.py``):

    python benchmarks/tpu_vmem_probe.py --deviceless v5e --set every --out "$OUT"
    python benchmarks/tpu_vmem_probe.py --render A.json --against B.json   # do two agree?

The kernel is the shipped ``matmul_tiled``; only the ``vmem_limit_bytes`` of its compiler
parameters is set, through the ``pallas_call`` it makes (a thread-local override).
``--render`` runs the model (``ci-bench tune --chip v5e`` alone) on the same tilings and
prints its VMEM count beside the compiler's need.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

MIB = 1 << 20
TILES = (256, 512, 1024, 2048)
# (size, dtype, (bm, bk, bn)): every tiling of 256-2048 at 4096³ (each grid axis moves), and
# at 2048³ the sweep's false fits and their neighbours (a k axis of one step or two).
PROBES: list[tuple[int, str, tuple[int, int, int]]] = [
    (4096, dtype, (bm, bk, bn))
    for dtype in ("bfloat16", "float32")
    for bm in TILES
    for bk in TILES
    for bn in TILES
] + [
    (2048, dtype, tiles)
    for dtype in ("bfloat16", "float32")
    for tiles in ((2048, 1024, 256), (2048, 2048, 256), (1024, 2048, 256), (1024, 1024, 1024))
]
# The second set (--set narrow): what the first left open. Counting a bfloat16 copy of each
# dot's left operand (2·bm·bk) matched the first set within -0.25/+0.85 MiB at 4096³ where bk
# or bn passes 256 (0.5-1 MiB less with bfloat16's single k step at 2048³), yet (2048, 2048,
# 128) at 2048³ bfloat16 compiled under 16 MiB where that count makes 19 MiB: narrow blocks
# (bn 128) and a single k step, at both sizes, with their neighbours.
NARROW: list[tuple[int, str, tuple[int, int, int]]] = [
    (size, dtype, (bm, bk, bn))
    for size in (2048, 4096)
    for dtype in ("bfloat16", "float32")
    for bm in (512, 1024, 2048)
    for bk in (1024, 2048)
    for bn in (128, 256, 512)
    if (size, dtype, (bm, bk, bn)) not in PROBES
]
# The third set (--set every): every program of the sweep (tiles 128-2048 per axis, clipped to
# the size) at the sizes issue 51 names, bfloat16 and float32; 628 compiles and their needs,
# meant for a deviceless run (--deviceless v5e) where compiling costs no chip time.
EVERY: list[tuple[int, str, tuple[int, int, int]]] = [
    (size, dtype, (bm, bk, bn))
    for size in (1024, 2048, 4096)
    for dtype in ("bfloat16", "float32")
    for bm in (128, *TILES)
    for bk in (128, *TILES)
    for bn in (128, *TILES)
    if max(bm, bk, bn) <= size
]
SETS = {"matmul": PROBES, "narrow": NARROW, "every": EVERY}
# Mosaic's refusal names the scoped allocation it needed: "Scoped allocation with size 16.99M
# and limit 16.00M exceeded scoped vmem limit by 1016.0K".
_NEED = re.compile(r"Scoped allocation with size ([0-9.]+)([KMG]?)")
_UNIT = {"": 1, "K": 1 << 10, "M": MIB, "G": 1 << 30}
_LIMIT = threading.local()
# Where the inputs live: None on a TPU host (its own chip); a topology's device with
# --deviceless, so libtpu compiles for a chip this host does not have.
_TARGET: list[Any] = [None]


def install_limit_override() -> None:
    """``pl.pallas_call`` as the kernel calls it, with this thread's ``vmem_limit_bytes``."""
    from jax.experimental import pallas as pl

    original = pl.pallas_call

    def with_limit(*args: Any, **kwargs: Any) -> Any:
        limit = getattr(_LIMIT, "bytes", None)
        params = kwargs.get("compiler_params")
        if limit is not None and hasattr(params, "vmem_limit_bytes"):  # Mosaic's, not Triton's
            kwargs["compiler_params"] = params.replace(vmem_limit_bytes=limit)
        return original(*args, **kwargs)

    pl.pallas_call = with_limit


def compile_message(fn: Any, shapes: list[Any], limit: int | None) -> str | None:
    """None when ``fn`` compiles for ``shapes``' chip with every Mosaic call's limit at
    ``limit`` bytes (None: as the kernel sets it), else the compiler's message. ``fn`` must
    be un-jitted, so that it is traced afresh (a jitted one would keep its first limit).
    Inputs placed on a topology's device make it the default device too: kernels that ask
    jax for the chip while they trace (``get_tpu_info``) are answered for it, not the host."""
    import contextlib

    import jax

    sharding = getattr(shapes[0], "sharding", None) if shapes else None
    device = next(iter(sharding.device_set)) if sharding is not None else None
    _LIMIT.bytes = limit
    try:
        with jax.default_device(device) if device else contextlib.nullcontext():
            jax.jit(fn).lower(*shapes).compile()
        return None
    except Exception as exc:  # the refusal is the datum
        return " ".join(str(exc).split())
    finally:
        _LIMIT.bytes = None


def needed_bytes(message: str) -> int | None:
    found = _NEED.search(message)
    return round(float(found.group(1)) * _UNIT[found.group(2)]) if found else None


def search_need(
    compiles_at: Any, step_mib: float, start: int = MIB, check_below: bool = True
) -> dict[str, Any]:
    """The scoped VMEM Mosaic allocates, from ``compiles_at(limit)`` (None or a refusal).
    A refusal names the allocation that passed the limit, which is not yet the whole
    (Mosaic allocates in turns: the pipeline's buffers, then its own temporaries), so the
    limit is raised from ``start`` bytes to each figure named, rounded up to ``step_mib``,
    until it compiles (``compiles_at_mib``); the last figure is the need, checked from below
    unless ``check_below`` is off (one compile less, for kernels that take seconds each)."""
    row: dict[str, Any] = {}
    step = int(step_mib * MIB)
    limit, need, named = start, None, []
    for _ in range(16):
        message = compiles_at(limit)
        if message is None:
            row["compiles_at_mib"] = limit / MIB
            break
        need = needed_bytes(message)
        if need is None or need < limit:  # refused for another reason: keep its words
            row["message"] = message[-600:]
            need = None
            break
        named.append(round(need / MIB, 3))
        limit = -(-need // step) * step + (step if need % step == 0 else 0)
    row["named_mib"] = named
    row["needs_mib"] = None if need is None else round(need / MIB, 3)
    if need is not None and check_below:
        row["refused_below"] = compiles_at(need - step) is not None
    return row


def probe(size: int, dtype: str, tiles: tuple[int, int, int], step_mib: float) -> dict:
    """``search_need`` for one tiling of the shipped forward at ``size``³."""
    import jax
    import jax.numpy as jnp

    from kernels.matmul import BlockSizes
    from kernels.matmul.kernel import _tpu_call

    began = time.monotonic()
    blocks = BlockSizes(*tiles).within(size, size, size)
    x = jax.ShapeDtypeStruct((1, size, size), jnp.dtype(dtype), sharding=_TARGET[0])

    def compiles_at(limit: int) -> str | None:
        return compile_message(lambda a, b: _tpu_call(a, b, blocks, 1, size, False), [x, x], limit)

    row: dict[str, Any] = {"size": size, "dtype": dtype, "tiles": list(tiles)}
    row["fits_16mib"] = compiles_at(16 * MIB) is None
    row.update(search_need(compiles_at, step_mib))
    row["seconds"] = round(time.monotonic() - began, 1)
    return row


def measure(opts: argparse.Namespace) -> int:
    from tpu_microbench import provenance

    if opts.deviceless:
        from tpu_deviceless import compiled_for, target

        _TARGET[0] = target(opts.deviceless)
    install_limit_override()
    out = opts.out / "vmem_probe.json"
    opts.out.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"provenance": provenance(), "set": opts.set, "step_mib": opts.step}
    record["rows"] = []
    record["provenance"]["script"] = "benchmarks/tpu_vmem_probe.py"
    if opts.deviceless:
        record["provenance"]["compiled_for"] = compiled_for(opts.deviceless, _TARGET[0])
    kind = record["provenance"].get("compiled_for", record["provenance"]["device"])["device_kind"]
    deadline = time.monotonic() + opts.deadline
    pool = concurrent.futures.ThreadPoolExecutor(opts.workers)
    probes = SETS[opts.set]
    futures = [pool.submit(probe, *p, opts.step) for p in probes]
    for future in futures:
        try:
            row = future.result(timeout=max(deadline - time.monotonic(), 0.1))
        except concurrent.futures.TimeoutError:
            break
        record["rows"].append(row)
        print(json.dumps(row), flush=True)
        out.write_text(json.dumps(record, indent=1))
    pool.shutdown(wait=False, cancel_futures=True)
    print(f"{len(record['rows'])}/{len(probes)} probed for {kind}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--set", choices=sorted(SETS), default="matmul", help="which tilings")
    parser.add_argument("--step", type=float, default=1 / 16, help="limit rounding, MiB")
    parser.add_argument("--workers", type=int, default=12)
    parser.add_argument("--deadline", type=float, default=150.0)
    parser.add_argument(
        "--deviceless", choices=("v5e", "v6e"), help="compile for this chip with libtpu, no TPU"
    )
    parser.add_argument("--render", type=Path, help="a vmem_probe.json: set the model beside")
    parser.add_argument("--against", type=Path, help="with --render: another probe to agree")
    opts = parser.parse_args()
    if opts.render:
        from tpu_vmem_probe_report import agreement, render

        return agreement(opts.render, opts.against) if opts.against else render(opts.render)
    if opts.out is None:
        parser.error("--out is required to measure")
    return measure(opts)


if __name__ == "__main__":
    raise SystemExit(main())
