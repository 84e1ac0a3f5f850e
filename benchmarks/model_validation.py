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
4. how long the model takes for the whole ``ci`` profile of both kernels;
5. jax's own shipped TPU kernels (``jax.experimental.pallas.ops.tpu``, imported from the
   installed jax, never copied): each traced and lowered *as every chip* the model knows on
   this CPU, its grid steps, HBM bytes and VMEM against figures worked out by hand (written
   beside each), and its modelled time per chip -- or "partial" with the reason, never a
   partial figure shown as whole. The public ``tops`` GLA library is added when importable.
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


KIB = 1024


def _shipped() -> list[tuple[str, object, object, tuple[int, int, int] | None, str]]:
    """(name, fn, make_inputs, hand-checked (steps, HBM bytes, VMEM bytes) or None, how)."""
    import importlib

    from jax.experimental.pallas.ops.tpu import flash_attention
    from jax.experimental.pallas.ops.tpu import matmul as jax_matmul

    imp = importlib.import_module
    mb = imp("jax.experimental.pallas.ops.tpu.megablox.gmm")
    sp = imp("jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_kernel")
    spm = imp("jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_mask")
    pa = imp("jax.experimental.pallas.ops.tpu.paged_attention.paged_attention_kernel")
    rpa = imp("jax.experimental.pallas.ops.tpu.ragged_paged_attention.kernel")
    bf = jnp.bfloat16
    ones = lambda *shape: jnp.ones(shape, bf)  # noqa: E731
    groups = jnp.array([128] * 4, jnp.int32)
    full = spm.MultiHeadMask([spm.FullMask((1024, 1024)) for _ in range(4)])
    blocks = sp.BlockSizes(block_q=256, block_kv=256, block_kv_compute=256)
    splash = sp.make_splash_mha_single_device(full, block_sizes=blocks)
    return [
        (
            "matmul 1024³ (256, 512)+256",
            functools.partial(jax_matmul.matmul, block_shape=(256, 512), block_k=256),
            lambda: (ones(1024, 1024), ones(1024, 1024)),
            # grid (4, 2, 4), k fastest: x (2 MiB) read N/r = 2x, y 4x, out once: 14 MiB;
            # 2 x (128 + 256 + 256) KiB blocks + a (256, 512) f32 accumulator (512 KiB).
            (32, 14 * MIB, 1792 * KIB),
            "grid 4·2·4; x 2x, y 4x, out 1x; 2·(128+256+256) KiB + 512 KiB acc",
        ),
        (
            "matmul 4096³ (512, 1024)+1024",
            functools.partial(jax_matmul.matmul, block_shape=(512, 1024), block_k=1024),
            lambda: (ones(4096, 4096), ones(4096, 4096)),
            # grid (8, 4, 4): x (32 MiB) 4x, y 8x, out once: 416 MiB; 2 x (1 + 2 + 1) MiB of
            # blocks + a (512, 1024) f32 accumulator (2 MiB).
            (128, 416 * MIB, 10 * MIB),
            "grid 8·4·4; x 4x, y 8x, out 1x; 2·(1+2+1) MiB + 2 MiB acc",
        ),
        (
            "flash_attention 1x8x2048x128",
            flash_attention.flash_attention,
            lambda: (ones(1, 8, 2048, 128),) * 3,
            # 128-row blocks: 8 heads x 16 q blocks x 16 kv blocks = 2,048 steps; q and o
            # once (4 MiB each), k and v re-read per q block: 16 x 4 MiB each: 136 MiB.
            # VMEM: 2 buffers of four (128, 128) bf16 blocks + m, l and acc f32 scratch.
            (2048, 136 * MIB, 448 * KIB),
            "2,048 steps; q, o once; k, v 16x: 4 + 4 + 64 + 64 MiB; 2·4·32 + 3·64 KiB",
        ),
        (
            "megablox gmm 512x256 @ 4x256x256",
            functools.partial(mb.gmm, tiling=(128, 128, 128)),
            lambda: (ones(512, 256), ones(4, 256, 256), groups),
            # grid (n 2, active m tiles 4 -- read from the group sizes --, k 2), k fastest:
            # lhs and rhs blocks change every step (16 x 32 KiB each), f32 out once
            # (512 KiB); 2 x (32 + 32 + 64) KiB + a 64 KiB f32 accumulator.
            (16, 1536 * KIB, 320 * KIB),
            "dynamic grid 2·4·2; lhs, rhs 16 x 32 KiB; f32 out 512 KiB; 2·128 KiB + 64 KiB",
        ),
        (
            "megablox tgmm 256x512, 512x256",
            functools.partial(mb.tgmm, tiling=(128, 128, 128)),
            lambda: (ones(256, 512), ones(512, 256), groups),
            # grid (k 2, n 2, active m tiles 4): lhs and rhs blocks change every step (16 x 32
            # KiB each); each group's f32 (128, 128) out block once: 16 x 64 KiB.
            (16, 2 * MIB, 320 * KIB),
            "dynamic grid 2·2·4; lhs, rhs 16 x 32 KiB; out 16 x 64 KiB; 2·128 KiB + 64 KiB",
        ),
        (
            "splash_attention MHA 4x1024x128 full mask",
            lambda q, k, v: splash(q, k, v),
            lambda: (ones(4, 1024, 128),) * 3,
            # grid (4 heads, 4 q blocks, 4 kv blocks): q and o once (1 MiB each), k and v
            # every step (64 x 64 KiB = 4 MiB each), the kernel's 0.375 MiB of metadata once.
            (64, 10 * MIB + 384 * KIB, None),
            "64 steps; q, o once; k, v 4x; 0.375 MiB of mask metadata once",
        ),
        (
            "paged_attention 4 seqs x 256, pages of 16",
            functools.partial(pa.paged_attention, pages_per_compute_block=4),
            lambda: (
                ones(4, 8, 128),
                ones(1, 64, 16, 128),
                ones(1, 64, 16, 128),
                jnp.full((4,), 256, jnp.int32),
                jnp.arange(64, dtype=jnp.int32).reshape(4, 16),
            ),
            None,
            "page loop trips from lengths per step; guarded copies: costliest (upper bound)",
        ),
        (
            "ragged_paged_attention 2 seqs",
            functools.partial(
                rpa.ragged_paged_attention, num_kv_pages_per_block=4, num_queries_per_block=32
            ),
            lambda: (
                ones(128, 8, 128),
                ones(64, 16, 2, 128),
                jnp.array([256, 256, 0, 0], jnp.int32),
                jnp.arange(64, dtype=jnp.int32).reshape(4, 16),
                jnp.array([0, 64, 128, 128, 128], jnp.int32),
                jnp.array([2], jnp.int32),
            ),
            None,
            "a while loop over kv blocks with a dynamic trip count: partial",
        ),
    ]


def _lowers(fn, args, chips) -> str:
    """'n/m' chips whose export for TPU, traced as that chip, holds a Mosaic call."""
    from ci_bench.measure.model.aschip import as_chip

    good = 0
    for name in chips:
        with as_chip(name):
            try:
                text = jax.export.export(jax.jit(fn), platforms=["tpu"])(*args).mlir_module()
                good += "tpu_custom_call" in text
            except Exception:  # counted as not lowering
                pass
    return f"{good}/{len(chips)}"


def shipped_rows() -> list[list]:
    chips = list(CHIP_NAMES)
    rows = []
    for name, fn, make, hand, how in _shipped():
        args = make()
        model = analyze_case(adhoc(fn, lambda c, k, a=args: a), ADHOC, chips)
        figures = (model.grid_steps, model.hbm_bytes, model.vmem_bytes)
        if hand is None:
            check = "–"
        else:
            check = (
                "yes"
                if all(h is None or h == f for h, f in zip(hand, figures, strict=True))
                else "NO"
            )
        times = (
            " / ".join(f"{model.chips[c].modelled_us:,.0f}" for c in ("v5e", "v6e", "7x"))
            if model.status == "ok"
            else model.status
        )
        rows.append(
            [
                name,
                _lowers(fn, args, chips),
                model.status,
                model.grid_steps if model.grid_steps is not None else "–",
                f"{(model.hbm_bytes or 0) / MIB:.3f}",
                f"{(model.vmem_bytes or 0) / KIB:.0f}",
                check,
                times,
                how if model.status != "not_modelled" else (model.reason or "")[:60],
            ]
        )
    return rows


def tops_row() -> list | None:
    """The public tops GLA (primatrix/pallas-kernel), when it is importable here."""
    try:
        from tops.ops.gla import chunk_gla as tops_gla  # type: ignore[import-not-found]
    except ImportError:
        return None
    f32 = jnp.float32
    args = tuple(jnp.ones((1, 1024, 4, 128), f32) for _ in range(4))
    model = analyze_case(adhoc(lambda *a: tops_gla(*a), lambda c, k: args), ADHOC, ["v5e"])
    return [
        "tops chunk_gla 1x1024x4x128 f32",
        _lowers(lambda *a: tops_gla(*a), args, list(CHIP_NAMES)),
        model.status,
        model.grid_steps,
        f"{(model.hbm_bytes or 0) / MIB:.3f}",
        f"{(model.vmem_bytes or 0) / KIB:.0f}",
        "–",
        f"{model.chips['v5e'].modelled_us:,.0f}" if model.status == "ok" else model.status,
        (model.reason or "")[:60],
    ]


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
    print(f"\n5. jax {jax.__version__}'s shipped TPU kernels, as every chip ({len(CHIP_NAMES)})\n")
    cols = [
        "kernel",
        "lowers",
        "model",
        "steps",
        "HBM MiB",
        "VMEM KiB",
        "hand-checked",
        "v5e / v6e / 7x µs",
        "how",
    ]
    rows = shipped_rows()
    extra = tops_row()
    print(tabulate(rows + ([extra] if extra else []), headers=cols, tablefmt="github"))
    if extra is None:
        print("\n(tops is not importable here: its GLA row is left out)")


if __name__ == "__main__":
    main()
