"""Validate the cost model: hand-computed bytes and VMEM, jax's own kernels, published times.

    python benchmarks/model_validation.py

Prints four tables:

1. the project's matmul at several tilings and GLA at several chunk sizes: the model's HBM
   bytes and VMEM against the closed-form expectation written out below (they must agree
   exactly), and the re-read operand;
2. jax's own ``pallas.ops.tpu.matmul`` and ``flash_attention`` traced on this CPU;
3. the Pallas TPU matmul guide's kernel (docs/pallas/tpu/matmul.md in jax, the version with
   a VMEM accumulator) modelled on v5e against the times published in the guide's
   notebook outputs (docs/pallas/tpu/matmul.ipynb, measured on a TPU v5e with ``timeit``,
   Python dispatch included);
4. how long the model takes for the whole ``ci`` profile of both kernels.
"""

from __future__ import annotations

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from tabulate import tabulate

from ci_bench.contract.spec import Case, KernelSpec, MatrixProfile, Tolerance
from ci_bench.measure.model import analyze_case
from ci_bench.measure.model.chips import CHIP_NAMES
from kernels.gla import SPEC as GLA
from kernels.gla.kernel import chunk_gla
from kernels.matmul import SPEC as MATMUL
from kernels.matmul import BlockSizes, matmul_tiled

MIB = 1024 * 1024

# The guide's published v5e times (seconds per call), cell "bm=128, bk=128, bn=128" and
# "bm=512, bk=1024, bn=1024", bfloat16 m = k = n.
PUBLISHED_V5E = {
    ((128, 128, 128), 1024): 0.00029766598949208854,
    ((128, 128, 128), 4096): 0.011771515250438824,
    ((128, 128, 128), 8192): 0.09183577066054567,
    ((512, 1024, 1024), 1024): 0.00012708659982308746,
    ((512, 1024, 1024), 4096): 0.00088908776990138,
    ((512, 1024, 1024), 8192): 0.006099433819763363,
}


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


def guide_kernel(x, y, *, bm: int, bk: int, bn: int):
    """The matmul guide's kernel, as published (docs/pallas/tpu/matmul.md)."""

    def kernel(x_ref, y_ref, z_ref, acc_ref, *, nsteps):
        @pl.when(pl.program_id(2) == 0)
        def _() -> None:
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

        @pl.when(pl.program_id(2) == nsteps - 1)
        def _() -> None:
            z_ref[...] = acc_ref[...].astype(z_ref.dtype)

    m, k = x.shape
    _, n = y.shape
    return pl.pallas_call(
        functools.partial(kernel, nsteps=k // bk),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[
                pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                pl.BlockSpec((bk, bn), lambda i, j, k: (k, j)),
            ],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
            scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
            grid=(m // bm, n // bn, k // bk),
        ),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")
        ),
    )(x, y)


def guide_rows() -> list[list]:
    rows = []
    for (tiling, n), published in PUBLISHED_V5E.items():
        bm, bk, bn = tiling
        fn = functools.partial(guide_kernel, bm=bm, bk=bk, bn=bn)
        make = lambda c, k, n=n: (jnp.ones((n, n), jnp.bfloat16),) * 2  # noqa: E731
        model = analyze_case(adhoc(fn, make, lambda c, n=n: 2 * n**3), ADHOC, ["v5e"])
        v5e = model.chips["v5e"]
        modelled = v5e.modelled_us / 1e6
        terms = (v5e.compute_us, v5e.memory_us, v5e.overhead_us)
        rows.append(
            [
                f"({bm}, {bk}, {bn})",
                f"{n}³",
                f"{published * 1e3:.3f}",
                f"{modelled * 1e3:.3f}",
                f"{modelled / published - 1:+.1%}",
                " / ".join(f"{t / 1e3:.3f}" for t in terms),
                v5e.bound,
                f"{2 * n**3 / published / 197e12:.1%}",
                f"{v5e.mfu_ceiling:.1%}",
            ]
        )
    return rows


def ci_profile_seconds() -> tuple[int, float]:
    start = time.perf_counter()
    count = 0
    for spec in (MATMUL, GLA):
        for case in spec.cases("ci"):
            assert analyze_case(spec, case, list(CHIP_NAMES)).status == "ok"
            count += 1
    return count, time.perf_counter() - start


def main() -> None:
    cols = [
        "kernel",
        "tiling",
        "steps",
        "HBM MiB",
        "expected",
        "VMEM KiB",
        "expected",
        "exact",
        "re-read",
        "v5e µs",
    ]
    print("1. The project's kernels against hand-computed HBM bytes and VMEM\n")
    print(tabulate(matmul_rows() + gla_rows(), headers=cols, disable_numparse=True))
    print("\n2. jax's own TPU kernels, traced on this CPU\n")
    cols = [
        "kernel",
        "grid",
        "HBM MiB",
        "ideal",
        "re-read",
        "VMEM MiB",
        "FLOPs/model",
        "v5e µs",
        "v5p µs",
        "notes",
    ]
    print(tabulate(jax_kernel_rows(), headers=cols, disable_numparse=True))
    print("\n3. The matmul guide's kernel on TPU v5e: modelled vs published (bf16, m = k = n)\n")
    cols = [
        "tiling",
        "size",
        "published ms",
        "modelled ms",
        "off",
        "compute / HBM / steps ms",
        "bound",
        "published MFU",
        "modelled MFU",
    ]
    print(tabulate(guide_rows(), headers=cols, disable_numparse=True))
    count, seconds = ci_profile_seconds()
    print(
        f"\n4. The ci profile ({count} cases, {len(CHIP_NAMES)} chips) modelled in {seconds:.1f} s"
    )


if __name__ == "__main__":
    main()
