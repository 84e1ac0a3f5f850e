"""The points of tpu_model_validation.py, one ``Family`` each: jax's Pallas TPU kernels as
shipped (``flash``, ``splash``, megablox ``gmm`` and ``tgmm``, ``paged``) and the project's
(``matmul``, ``gla``). A point is a name and a build that imports its kernel and makes its
inputs only when called, so that listing the points costs nothing and a kernel that fails
to import is that point's error. Each family has full shapes (a TPU) and ``--quick`` ones.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):  # the repository (kernels, ci_bench), benchmarks
    if _path not in sys.path:
        sys.path.insert(0, _path)

from ci_bench.contract.spec import Case  # noqa: E402

Built = tuple[Callable[..., Any], tuple[Any, ...]]
Point = tuple[str, Callable[[], Built]]  # name, build: imports and arrays made only then
TPU_OPS = "jax.experimental.pallas.ops.tpu."
BF16, F32 = "bfloat16", "float32"


def _randn(shape: tuple[int, ...], seed: int) -> jax.Array:
    return jax.random.normal(jax.random.PRNGKey(seed), shape, jnp.float32).astype(jnp.bfloat16)


def _qkv(shape: tuple[int, ...]) -> tuple[jax.Array, ...]:
    return tuple(_randn(shape, seed) for seed in range(3))


def _x(values: tuple[int, ...]) -> str:
    return "x".join(map(str, values))


def _flash(shape: tuple[int, int, int, int], block: int, causal: bool) -> Built:
    """flash_attention forward: q, k, v [batch, heads, seq, head_dim], one block size."""
    fa = importlib.import_module(TPU_OPS + "flash_attention")
    blocks = fa.BlockSizes(block_q=block, block_k_major=block, block_k=block, block_b=1)
    scale = shape[-1] ** -0.5
    fn = functools.partial(fa.flash_attention, causal=causal, sm_scale=scale, block_sizes=blocks)
    return fn, _qkv(shape)


def _splash(heads: int, seq: int, block: int, causal: bool) -> Built:
    """Splash attention MHA, head_dim 128: q, k, v [heads, seq, 128]."""
    sp = importlib.import_module(TPU_OPS + "splash_attention.splash_attention_kernel")
    spm = importlib.import_module(TPU_OPS + "splash_attention.splash_attention_mask")
    kind = spm.CausalMask if causal else spm.FullMask
    mask = spm.MultiHeadMask([kind((seq, seq)) for _ in range(heads)])
    blocks = sp.BlockSizes(block_q=block, block_kv=block, block_kv_compute=block)
    kernel = sp.make_splash_mha_single_device(mask, block_sizes=blocks)
    return (lambda q, k, v: kernel(q, k, v)), _qkv((heads, seq, 128))


def _megablox(t: bool, m: int, k: int, n: int, groups: int, tiling: tuple[int, ...]) -> Built:
    """gmm: [m, k] x [groups, k, n]; tgmm (``t``): [k, m] x [m, n] -> [groups, k, n];
    groups of m / groups rows each; tiling (tm, tk, tn)."""
    mb = importlib.import_module(TPU_OPS + "megablox.gmm")
    sizes = jnp.full((groups,), m // groups, jnp.int32)
    lhs = _randn((k, m) if t else (m, k), 0)
    rhs = _randn((m, n) if t else (groups, k, n), 1)
    return functools.partial(mb.tgmm if t else mb.gmm, tiling=tiling), (lhs, rhs, sizes)


def _paged(seqs: int, length: int, heads: tuple[int, int], per_block: int) -> Built:
    """paged_attention: every sequence full, its 16-token pages scattered; head_dim 128;
    heads (kv, q)."""
    pa = importlib.import_module(TPU_OPS + "paged_attention.paged_attention_kernel")
    (kv_heads, q_heads), page, total = heads, 16, seqs * length // 16
    indices = jax.random.permutation(jax.random.PRNGKey(3), total).astype(jnp.int32)
    pages = [_randn((kv_heads, total, page, 128), seed) for seed in (1, 2)]
    lengths = jnp.full((seqs,), length, jnp.int32)
    args = (_randn((seqs, q_heads, 128), 0), *pages, lengths, indices.reshape(seqs, -1))
    return functools.partial(pa.paged_attention, pages_per_compute_block=per_block), args


def _matmul(n: int, dtype: str, tiles: tuple[int, int, int]) -> Built:
    from kernels.matmul import BlockSizes, make_inputs, tiled

    case = Case("matmul", {"B": 1, "M": n, "K": n, "N": n}, dtype)
    return tiled(BlockSizes(*tiles)), tuple(make_inputs(case, jax.random.PRNGKey(0)))


def _gla(shape: tuple[int, int, int, int, int], dtype: str, chunk: int) -> Built:
    from kernels.gla import make_inputs, with_chunk

    case = Case("gla", dict(zip("BTHKV", shape, strict=True)), dtype)
    return with_chunk(chunk), tuple(make_inputs(case, jax.random.PRNGKey(0)))


@dataclasses.dataclass(frozen=True)
class Family:
    build: Callable[..., Built]
    full: list[tuple[Any, ...]]  # each point's arguments to build
    quick: list[tuple[Any, ...]]
    name: Callable[..., str]
    jax_kernel: bool = True  # jax's own: interpreted under force_tpu_interpret_mode on a CPU

    def points(self, quick: bool) -> list[Point]:
        table = self.quick if quick else self.full
        return [(self.name(*p), functools.partial(self.build, *p)) for p in table]


CAUSAL = (False, True)
GMM = [  # (m, k, n, groups, (tm, tk, tn))
    (4096, 2048, 2048, 8, (128, 128, 128)), (4096, 2048, 2048, 8, (512, 512, 512)),
    (4096, 2048, 2048, 8, (512, 1024, 1024)), (8192, 4096, 1024, 16, (512, 512, 1024)),
    (2048, 1024, 4096, 4, (256, 512, 512)), (16384, 1024, 1024, 32, (512, 1024, 1024)),
    (8192, 2048, 2048, 64, (256, 512, 512)),
]  # fmt: skip
TGMM = [
    (4096, 2048, 2048, 8, (128, 128, 128)), (4096, 2048, 2048, 8, (512, 512, 512)),
    (8192, 1024, 1024, 16, (512, 512, 512)), (2048, 1024, 4096, 4, (256, 512, 512)),
    (16384, 1024, 1024, 32, (512, 512, 512)), (8192, 1024, 1024, 64, (256, 512, 512)),
]  # fmt: skip
QUICK_GMM = [(False, 256, 256, 256, 2, (128, 128, 128))]
PAGED = [  # (seqs, length, (kv heads, q heads), pages per compute block)
    (8, 2048, (8, 32), 8), (8, 2048, (8, 32), 32), (32, 1024, (8, 32), 8),
    (32, 1024, (8, 32), 16), (32, 4096, (8, 32), 16), (32, 4096, (8, 32), 64),
    (128, 512, (1, 8), 8), (128, 512, (1, 8), 32),
]  # fmt: skip
MATMUL = [  # (n, dtype, (bm, bk, bn))
    *((2048, BF16, t) for t in ((256, 256, 256), (512, 512, 512), (512, 512, 1024),
                                (1024, 512, 1024), (1024, 1024, 128))),
    *((1024, BF16, t) for t in ((256, 256, 256), (512, 512, 512), (1024, 1024, 128))),
    *((2048, F32, t) for t in ((512, 512, 512), (512, 512, 1024))),
    *((1024, F32, t) for t in ((256, 256, 256), (512, 512, 1024))),
]  # fmt: skip
GLA_CI = [(1, 1024, 4, 64, 64), (2, 512, 4, 128, 128), (1, 4096, 2, 128, 128)]
GLA_QUICK = [(1, 128, 2, 64, 64), (1, 256, 2, 64, 64)]
FAMILIES: dict[str, Family] = {
    "flash": Family(
        _flash,
        [(s, b, c) for s, b in (((1, 8, 2048, 128), 128), ((1, 8, 2048, 128), 512),
                                ((2, 16, 4096, 128), 512), ((4, 8, 1024, 64), 256))
         for c in CAUSAL],
        [((1, 2, 256, 128), 128, c) for c in CAUSAL],
        lambda s, b, c: f"{_x(s)} blocks {b} causal={c}",
    ),
    "splash": Family(
        _splash,
        [(8, s, b, c) for s, b in ((1024, 512), (2048, 512), (4096, 512), (4096, 256))
         for c in CAUSAL],
        [(2, 256, 128, c) for c in CAUSAL],
        lambda h, s, b, c: f"{h}x{s}x128 {'causal' if c else 'full'} blocks {b}",
    ),
    "gmm": Family(
        _megablox, [(False, *p) for p in GMM], QUICK_GMM,
        lambda t, m, k, n, g, tiles: f"m{m} k{k} n{n} g{g} tiles {_x(tiles)}",
    ),
    "tgmm": Family(
        _megablox, [(True, *p) for p in TGMM], [(True, *p[1:]) for p in QUICK_GMM],
        lambda t, m, k, n, g, tiles: f"m{m} k{k} n{n} g{g} tiles {_x(tiles)}",
    ),
    "paged": Family(
        _paged, PAGED, [(2, 128, (1, 8), 4), (2, 128, (2, 8), 8)],
        lambda s, n, h, p: f"{s} seqs x {n}, heads {h[0]}/{h[1]}, {p} pages/block",
    ),
    "matmul": Family(
        _matmul, MATMUL, [(256, d, (t,) * 3) for d in (BF16, F32) for t in (128, 256)],
        lambda n, d, t: f"{n}³ {d} tiles {_x(t)}", jax_kernel=False,
    ),
    "gla": Family(
        _gla,
        [(s, d, c) for s in GLA_CI for d in (BF16, F32) for c in (64, 128)],
        [(s, d, 64) for s in GLA_QUICK for d in (BF16, F32)],
        lambda s, d, c: "B{}-T{}-H{}-K{}-V{} ".format(*s) + f"{d} chunk {c}", jax_kernel=False,
    ),
}  # fmt: skip
