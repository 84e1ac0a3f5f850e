"""Tables 1 and 2 of model_validation.py: the project's kernels against hand-computed bytes,
and jax's own TPU kernels traced on this CPU (with ``adhoc``, the spec that wraps any function).
"""

from __future__ import annotations

import dataclasses
import functools

import jax.numpy as jnp

from ci_bench.contract.spec import Case, KernelSpec, MatrixProfile, Tolerance
from ci_bench.measure.model import analyze_case
from kernels.gla import SPEC as GLA
from kernels.gla.kernel import chunk_gla
from kernels.matmul import SPEC as MATMUL
from kernels.matmul import BlockSizes, matmul_tiled

MIB = 1024 * 1024


def adhoc(fn, make, flops=lambda c: 0) -> KernelSpec:
    return KernelSpec(
        name="adhoc",
        version="0.1.0",
        pallas=fn,
        native=fn,
        reference=fn,
        make_inputs=make,
        flops=flops,
        bytes_accessed=lambda c: 0,
        tolerances={"bfloat16": Tolerance(atol=1, rtol=1)},
        matrix={"smoke": MatrixProfile(({"N": 1},), ("bfloat16",))},
        shape_keys=("N",),
    )


ADHOC = Case("adhoc", {"N": 1}, "bfloat16")


def padded(rows: int, cols: int, itemsize: int) -> int:
    """A (rows, cols) block in VMEM: rows to 8 x (4 / itemsize), lanes to 128."""
    sub = 8 * (4 // itemsize)
    return -(-rows // sub) * sub * (-(-cols // 128) * 128) * itemsize


def matmul_rows() -> list[list]:
    rows = []
    for n in (512, 1024):
        for bm, bk, bn in ((128, 128, 128), (256, 128, 128), (64, 128, 128), (128, 512, 512)):
            spec = dataclasses.replace(
                MATMUL,
                pallas=functools.partial(matmul_tiled, block_sizes=BlockSizes(bm, bk, bn)),
            )
            model = analyze_case(
                spec, Case("matmul", {"B": 1, "M": n, "K": n, "N": n}, "bfloat16"), ["v5e"]
            )
            # a (M x K) is read N/bn times unless its block never moves along j and k
            # (K/bk = 1: then once); b (K x N) M/bm times unless K/bk = N/bn = 1; out once.
            a_reads = n // bn if n // bk > 1 else 1
            b_reads = n // bm if (n // bk > 1 or n // bn > 1) else 1
            expected_hbm = (a_reads + b_reads + 1) * n * n * 2
            expected_vmem = 2 * (
                padded(bm, bk, 2) + padded(bk, bn, 2) + padded(bm, bn, 2)
            ) + padded(bm, bn, 4)
            call = model.calls[0]
            rows.append(
                [
                    f"matmul {n}³ bf16",
                    f"({bm}, {bk}, {bn})",
                    model.grid_steps,
                    f"{model.hbm_bytes / MIB:.3f}",
                    f"{expected_hbm / MIB:.3f}",
                    f"{model.vmem_bytes / 1024:.0f}",
                    f"{expected_vmem / 1024:.0f}",
                    "yes"
                    if (model.hbm_bytes, model.vmem_bytes) == (expected_hbm, expected_vmem)
                    else "NO",
                    call.reread_operand or "–",
                    f"{model.chips['v5e'].modelled_us:,.1f}",
                ]
            )
    return rows


def gla_rows() -> list[list]:
    rows = []
    for (B, T, H, D), dtype in ((1, 1024, 4, 64), "bfloat16"), ((2, 512, 4, 128), "float32"):
        for chunk in (32, 64, 128):
            spec = dataclasses.replace(
                GLA, pallas=lambda q, k, v, g, c=chunk: chunk_gla(q, k, v, g, chunk_size=c)
            )
            case = Case("gla", {"B": B, "T": T, "H": H, "K": D, "V": D}, dtype)
            model = analyze_case(spec, case, ["v5e"])
            size = 4 if dtype == "float32" else 2
            # q, k, v, g read once and o written once; two buffers of five (C, D) blocks
            # and the f32 (V, K) state in VMEM.
            expected_hbm = 5 * B * H * T * D * size
            expected_vmem = 2 * 5 * padded(chunk, D, size) + padded(D, D, 4)
            rows.append(
                [
                    f"gla B{B}-T{T}-H{H}-D{D} {dtype}",
                    f"chunk {chunk}",
                    model.grid_steps,
                    f"{model.hbm_bytes / MIB:.3f}",
                    f"{expected_hbm / MIB:.3f}",
                    f"{model.vmem_bytes / 1024:.0f}",
                    f"{expected_vmem / 1024:.0f}",
                    "yes"
                    if (model.hbm_bytes, model.vmem_bytes) == (expected_hbm, expected_vmem)
                    else "NO",
                    model.calls[0].reread_operand or "–",
                    f"{model.chips['v5e'].modelled_us:,.1f}",
                ]
            )
    return rows


def jax_kernel_rows() -> list[list]:
    from jax.experimental.pallas.ops.tpu import flash_attention
    from jax.experimental.pallas.ops.tpu import matmul as jax_matmul

    rows = []
    ones = lambda *shape: jnp.ones(shape, jnp.bfloat16)  # noqa: E731
    for n, block, bk in ((1024, (256, 512), 256), (4096, (512, 1024), 1024)):
        fn = functools.partial(jax_matmul.matmul, block_shape=block, block_k=bk)
        spec = adhoc(fn, lambda c, k, n=n: (ones(n, n), ones(n, n)), lambda c, n=n: 2 * n**3)
        rows.append(_jax_row(f"pallas.ops.tpu.matmul {n}³ {block}+{bk}", spec))
    for causal in (False, True):
        fn = functools.partial(flash_attention.flash_attention, causal=causal)
        make = lambda c, k: tuple(ones(1, 8, 2048, 128) for _ in range(3))  # noqa: E731
        flops = lambda c: 4 * 8 * 2048 * 2048 * 128  # noqa: E731
        rows.append(_jax_row(f"flash_attention 8x2048x128 causal={causal}", adhoc(fn, make, flops)))
    return rows


def _jax_row(name: str, spec: KernelSpec) -> list:
    model = analyze_case(spec, ADHOC, ["v5e", "v5p"])
    call = model.calls[0]
    return [
        name,
        call.grid,
        f"{model.hbm_bytes / MIB:.1f}",
        f"{model.ideal_bytes / MIB:.1f}",
        call.reread_operand or "–",
        f"{model.vmem_bytes / MIB:.2f}",
        f"{model.flops_ratio:.2f}" if model.flops_ratio is not None else "–",
        f"{model.chips['v5e'].modelled_us:,.0f} ({model.chips['v5e'].bound})",
        f"{model.chips['v5p'].modelled_us:,.0f}",
        "; ".join(model.notes) or "–",
    ]
