"""Table 5 of model_validation.py: jax's shipped TPU kernels (and tops' GLA) as every chip.

Each is traced and lowered as every chip the model knows, its figures set against ones
worked out by hand (written beside each); "partial" with the reason, never a partial figure.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from model_validation_kernels import ADHOC, MIB, adhoc

from ci_bench.measure.model import analyze_case
from ci_bench.measure.model.chips import CHIP_NAMES

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
