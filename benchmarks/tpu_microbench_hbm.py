"""HBM rate by the streams a Pallas pipeline keeps in flight, and by their blocks' shapes:
chip microbenchmarks (issue 51), run from ``tpu_microbench_dma.py`` (its main, provenance
and table: ``--only hbm-streams,hbm-blocks,hbm-xla,hbm-shapes``).

The model's v5e rate is a streaming copy's, 656.6 GB/s (``tpu_microbench.py hbm``: one input
and one output block stream). Pipelines of any mix of read and write streams take reads /
756 GB/s + writes / about 581 GB/s (``hbm-streams``, 2026-12-07), yet jax's megablox tgmm
is counted 256 MiB (268 MB: reads and writes equal) in 343 µs, 783 GB/s, and XLA's own
B16-1024³ float32 dot 783-786 GB/s, where those rates give 1.19x their time (tgmm's inputs
turned out to be in VMEM, placed there by XLA: ``tpu_operand_placement.py``):

  hbm-streams  k input and j output streams of (512, 1024) float32 blocks over one grid
          (k = 1 ... 4, j = 0 ... 2; j = 0 writes one small block once), 128 MiB a stream:
          the rate by how many copies the pipeline keeps in flight, and their mix;
  hbm-blocks   one in, one out, by block size (0.25 ... 8 MiB);
  hbm-xla      XLA's own fused elementwise programs over the same arrays (1 in 1 out, 2 in
          1 out, 1 in 2 out): what the chip gives a program that is not a pallas_call;
  hbm-shapes   what tgmm does that those do not, one thing at a time: 1 MiB float32 blocks
          that are whole rows (256 x 1024) or a column band of a wider array (512 x 512 of
          2048, 1024 x 256 of 4096: one strided copy of many rows); tgmm's mix (two
          bfloat16 inputs of 0.5 MiB blocks, one float32 output of 1 MiB) as a plain grid;
          tgmm's own grid and index maps (n, k, m-tile) with a copy for a body; the plain
          grid's mix with a 512³ dot for a body (MXU work between the copies); and megablox tgmm
          itself at the point it was measured, m4096 k2048 n2048 g8, tiles 512³, so both
          sides of the comparison come from one machine and one run.

Each ``hbm-shapes`` row says the bytes its kernel's blocks move (``read_bytes``,
``write_bytes``), its rate over them (GB/s of 1e9 bytes) and the operands XLA placed in VMEM
for the kernel (``vmem_operands``, read from the compiled program as
``tpu_operand_placement.py`` does): megablox tgmm's inputs are, at this point, so its row
times XLA's staging of them too and its blocks' reads never reach HBM.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from tpu_microbench import device_us, one_line

INTERPRET = False  # set by tpu_microbench_dma.main: off a TPU, Pallas runs interpreted
TPU_OPS = "jax.experimental.pallas.ops.tpu."

LANES = 1024
# Six streams of 2 MiB blocks, or two of 8 MiB, two buffers each, pass the 16 MiB default
VMEM_LIMIT = 100 << 20


def stream_call(rows: int, block: int, k: int, j: int) -> tuple[Any, tuple[Any, ...]]:
    """A grid over ``rows // block`` steps reading k ``(rows, LANES)`` f32 arrays and writing
    j of them (j = 0: one (8, LANES) block, its index fixed, written back once)."""
    xs = tuple(jnp.full((rows, LANES), i + 1.0, jnp.float32) for i in range(k))

    def body(*refs):
        ins, outs = refs[:k], refs[k:]
        total = ins[0][...]
        for ref in ins[1:]:
            total = total + ref[...]
        if j == 0:
            outs[0][...] = total[:8]
        for n, ref in enumerate(outs if j else ()):
            ref[...] = total + n

    if j == 0:
        out_specs = [pl.BlockSpec((8, LANES), lambda s: (0, 0))]
        out_shape = [jax.ShapeDtypeStruct((8, LANES), jnp.float32)]
    else:
        out_specs = [pl.BlockSpec((block, LANES), lambda s: (s, 0))] * j
        out_shape = [jax.ShapeDtypeStruct((rows, LANES), jnp.float32)] * j
    call = pl.pallas_call(
        body,
        grid=(rows // block,),
        in_specs=[pl.BlockSpec((block, LANES), lambda s: (s, 0))] * k,
        out_specs=out_specs,
        out_shape=out_shape,
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=VMEM_LIMIT),
        interpret=INTERPRET,
    )
    return call, xs


def _row(bench: str, case: str, us: float, moved: int, **extra: Any) -> dict[str, Any]:
    return {"bench": bench, "case": case, "us": us, "gb_s": moved / us / 1e3, **extra}


def bench_hbm_streams(quick: bool, repeats: int) -> list[dict[str, Any]]:
    rows_n, block = (64, 16) if quick else (32768, 512)  # 128 MiB a stream, 2 MiB blocks
    found = []
    for k in (1, 2) if quick else (1, 2, 3, 4):
        for j in (0, 1) if quick else (0, 1, 2):
            call, xs = stream_call(rows_n, block, k, j)
            us = device_us(call, xs, repeats)
            moved = (k + j) * rows_n * LANES * 4
            found.append(_row("hbm-streams", f"{k} in, {j} out", us, moved, reads=k, writes=j))
    return found


def bench_hbm_blocks(quick: bool, repeats: int) -> list[dict[str, Any]]:
    rows_n = 64 if quick else 32768
    found = []
    for block in (8, 16) if quick else (64, 256, 512, 1024, 2048):
        call, xs = stream_call(rows_n, block, 1, 1)
        us = device_us(call, xs, repeats)
        moved = 2 * rows_n * LANES * 4
        mib = block * LANES * 4 / 2**20
        found.append(
            _row("hbm-blocks", f"1 in, 1 out, {mib:g} MiB blocks", us, moved, block_mib=mib)
        )
    return found


def bench_hbm_xla(quick: bool, repeats: int) -> list[dict[str, Any]]:
    rows_n = 64 if quick else 32768
    x = jnp.full((rows_n, LANES), 1.0, jnp.float32)
    y = jnp.full((rows_n, LANES), 2.0, jnp.float32)
    programs = {
        "1 in, 1 out": (lambda x: x * 2.0 + 1.0, (x,), 2),
        "2 in, 1 out": (lambda x, y: x * y + 1.0, (x, y), 3),
        "1 in, 2 out": (lambda x: (x + 1.0, x * 3.0), (x,), 3),
    }
    found = []
    for case, (fn, args, streams) in programs.items():
        us = device_us(fn, args, repeats)
        found.append(_row("hbm-xla", case, us, streams * rows_n * LANES * 4))
    return found


def band_call(
    rows: int, width: int, block: tuple[int, int], k: int, dtype: Any, dot: bool = False
) -> tuple[Any, tuple[Any, ...]]:
    """k ``(rows, width)`` inputs of ``dtype`` and one float32 output of the same shape, all
    in ``block`` blocks over a (row, column) grid: a block narrower than ``width`` is a
    strided copy of ``block[0]`` rows. The body sums its blocks, or with ``dot`` (two square
    blocks) multiplies them on the MXU, as tgmm's steps do between the same copies."""
    xs = tuple(jnp.full((rows, width), i + 1.0, dtype) for i in range(k))
    spec = pl.BlockSpec(block, lambda r, c: (r, c))

    def body(*refs: Any) -> None:
        if dot:
            refs[k][...] = jnp.dot(refs[0][...], refs[1][...], preferred_element_type=jnp.float32)
            return
        total = refs[0][...].astype(jnp.float32)
        for ref in refs[1:k]:
            total = total + ref[...].astype(jnp.float32)
        refs[k][...] = total

    call = pl.pallas_call(
        body,
        grid=(rows // block[0], width // block[1]),
        in_specs=[spec] * k,
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct((rows, width), jnp.float32),
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=VMEM_LIMIT),
        interpret=INTERPRET,
    )
    return call, xs


def tgmm_shaped_call(m: int, k: int, n: int, tile: int) -> tuple[Any, tuple[Any, ...]]:
    """megablox tgmm's pipeline for groups of one m-tile each: lhs ``[k, m]`` and rhs
    ``[m, n]`` bfloat16, the output ``[m / tile, k, n]`` float32, over the grid (n-tile,
    k-tile, m-tile) with its index maps, each step writing the sum of its two blocks."""
    lhs = jnp.full((k, m), 1.0, jnp.bfloat16)
    rhs = jnp.full((m, n), 2.0, jnp.bfloat16)

    def body(lhs_ref: Any, rhs_ref: Any, out_ref: Any) -> None:
        out_ref[...] = lhs_ref[...].astype(jnp.float32) + rhs_ref[...].astype(jnp.float32)

    call = pl.pallas_call(
        body,
        grid=(n // tile, k // tile, m // tile),
        in_specs=[
            pl.BlockSpec((tile, tile), lambda ni, ki, mi: (ki, mi)),
            pl.BlockSpec((tile, tile), lambda ni, ki, mi: (mi, ni)),
        ],
        out_specs=pl.BlockSpec((pl.Squeezed(), tile, tile), lambda ni, ki, mi: (mi, ki, ni)),
        out_shape=jax.ShapeDtypeStruct((m // tile, k, n), jnp.float32),
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=VMEM_LIMIT),
        interpret=INTERPRET,
    )
    return call, (lhs, rhs)


def megablox_tgmm(m: int, k: int, n: int, tile: int) -> tuple[Any, tuple[Any, ...]]:
    """jax's megablox tgmm as it ships, groups of one m-tile each (the validation set's
    point, ``tpu_model_validation_families.py``)."""
    mb = importlib.import_module(TPU_OPS + "megablox.gmm")
    lhs = jnp.full((k, m), 1.0, jnp.bfloat16)
    rhs = jnp.full((m, n), 2.0, jnp.bfloat16)
    sizes = jnp.full((m // tile,), tile, jnp.int32)
    call = mb.tgmm  # its tiling and interpret flag are static: bound below
    tiling = (tile, tile, tile)
    return (lambda a, b, s: call(a, b, s, tiling=tiling, interpret=INTERPRET)), (lhs, rhs, sizes)


# (rows, width, block, inputs, input dtype, a dot for a body) of each plain-grid case: 128 MiB a
# float32 stream on the chip; tiny and interpreted with --quick.
BANDS = (
    (32768, 1024, (256, 1024), 1, "float32", "sum"),
    (16384, 2048, (512, 512), 1, "float32", "sum"),
    (8192, 4096, (1024, 256), 1, "float32", "sum"),
    (16384, 2048, (512, 512), 2, "bfloat16", "sum"),
    (16384, 2048, (512, 512), 2, "bfloat16", "dot"),
)
QUICK_BANDS = (
    (64, 128, (16, 128), 1, "float32", "sum"),
    (32, 256, (16, 128), 1, "float32", "sum"),
    (16, 512, (16, 128), 1, "float32", "sum"),
    (32, 256, (16, 128), 2, "bfloat16", "sum"),
    (256, 256, (128, 128), 2, "bfloat16", "dot"),
)
Build = Callable[[], tuple[Any, tuple[Any, ...]]]


def _shape_cases(quick: bool) -> list[tuple[str, Build, int, int]]:
    """(case, build, bytes read, bytes written) of ``hbm-shapes``."""
    cases: list[tuple[str, Build, int, int]] = []
    for rows, width, block, k, dtype, body in QUICK_BANDS if quick else BANDS:
        name = jnp.dtype(dtype).name
        what = f"{k} in {name}, 1 out float32, {block[0]} x {block[1]} of {width} wide"
        what += ", a dot for a body" if body == "dot" else ""
        build = functools.partial(band_call, rows, width, block, k, dtype, body == "dot")
        size = rows * width
        cases.append((what, build, k * size * jnp.dtype(dtype).itemsize, size * 4))
    m, k, n, tile = (512, 256, 256, 128) if quick else (4096, 2048, 2048, 512)
    reads = 2 * (k * m * (n // tile) + m * n * (k // tile))  # lhs per n-tile, rhs per k-tile
    writes = 4 * (m // tile) * k * n
    point = f"m{m} k{k} n{n}, tiles {tile}³, groups of one tile"
    for what, make in (
        ("tgmm's grid, a copy body", tgmm_shaped_call),
        ("megablox tgmm", megablox_tgmm),
    ):
        cases.append((f"{what}, {point}", functools.partial(make, m, k, n, tile), reads, writes))
    return cases


def bench_hbm_shapes(quick: bool, repeats: int) -> list[dict[str, Any]]:
    """Each case's time and rate over the bytes its kernel's blocks move (``read_bytes``,
    ``write_bytes``), with the arrays XLA placed in VMEM for the kernel (``vmem_operands``,
    from the compiled program): a block copied from one of those moves no HBM bytes, and
    the program's time includes XLA staging it (megablox tgmm's inputs, docs/MODEL.md)."""
    from tpu_operand_placement import compiled_text, placements

    found = []
    for case, build, reads, writes in _shape_cases(quick):
        try:
            call, xs = build()
            us = device_us(call, xs, repeats)
            kernels = placements(compiled_text(call, xs))
        except Exception as exc:  # a shape the compiler refuses is said; the rest still run
            found.append({"bench": "hbm-shapes", "case": case, "error": one_line(exc)})
            continue
        placed = [o["array"] for k in kernels for o in k["operands"] if o["vmem"]]
        found.append(
            _row(
                "hbm-shapes",
                case,
                us,
                reads + writes,
                read_bytes=reads,
                write_bytes=writes,
                vmem_operands=placed,
            )
        )
    return found


HBM_BENCH = {
    "hbm-streams": bench_hbm_streams,
    "hbm-blocks": bench_hbm_blocks,
    "hbm-xla": bench_hbm_xla,
    "hbm-shapes": bench_hbm_shapes,
}
