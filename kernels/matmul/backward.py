"""The matmul's backward as one Pallas call on a TPU: ``dA = g·Bᵀ`` then ``dB = Aᵀ·g``.

Two ``pallas_call``s (0.4.0) each end on an output block written back with nothing left to
hide it behind, and each starts on blocks fetched with nothing to hide them: on a TPU v5e
at 1024³ bfloat16 the two products ran 16.3 + 17.0 µs against XLA's 30.6 for both, one
module whose two dots overlap (benchmarks/data/tpu_v5e_kernels_2026-12-06c.txt). Here one
grid runs both: axis 1 is the product (0: dA, 1: dB) and axis 2 the product's steps, so
dB's first blocks are fetched while dA's last computes and dA's last block is written back
while dB computes. ``g``'s block is ``[tm, tn]`` in both products: with one block along M
and one along N it is the same block throughout, read once for both.

Each product makes ``(M/tm)·(K/tk)·(N/tn)`` steps, the same count, over tiles per problem
dimension (tm for M, tk for K, tn for N: ``backward_tiles``' convention):

- dA [M,K] = g [M,N] · Bᵀ: output block (i, j) over (M/tm, K/tk), contraction over N/tn;
- dB [K,N] = Aᵀ · g: output block (i, j) over (K/tk, N/tn), contraction over M/tm.

An operand the running product does not read holds one block index: B its last (not
fetched again), A its first (fetched once, before dB needs it). An output holds its index
through the other product (dA its last block, dB its first): Pallas writes a block back
when its index changes or the grid ends, and jax's TPU interpreter checks that no output
block is visited again after another.

Five blocks double-buffered can pass the 16 MiB scoped default where the two calls' three
do not, so the call raises its ``vmem_limit_bytes`` (``vmem_limit``), but only within a
budget the caller gives (``vmem_budget_of`` the chip): past it, two calls. Off a TPU the
budget is the default itself, so what ``ci-bench lower`` checks there fits every chip.
Only problems the tiles divide (and ``tm`` a multiple of 128 or all of M, for the
transpose of A's block in VMEM) take this path; the rest run the two calls. A dimension one
block covers is that block whole (``BlockSizes.within``), so 513³ at tiles of 1024 is one
call since 0.8.0.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from kernels.matmul import entrywise
from kernels.matmul.kernel import (
    BlockSizes,
    batch_block,
    default_backend,
    matmul_tiled,
    round_up,
)

MIB = 1 << 20
# The scoped default of every TPU up to v5e (v4's whole VMEM). Past it the call asks for what
# it counts plus half (Mosaic's own copies, such as a dot's left operand in bfloat16:
# benchmarks/tpu_vmem_probe.py), at most 96 MiB: what ran on a v5e (128 MiB of VMEM).
SCOPED_DEFAULT = 16 * MIB


def fused_fits(M: int, K: int, N: int, tm: int, tk: int, tn: int) -> bool:
    """Whether one call can run this backward with these per-dimension blocks: they divide
    the problem, and A's transposed block has a lane dimension of 128s or all of M."""
    return M % tm == 0 and K % tk == 0 and N % tn == 0 and (tm % 128 == 0 or tm == M)


def vmem_limit(bb: int, tm: int, tk: int, tn: int, itemsize: int, scratch: bool) -> int | None:
    """The fused call's ``vmem_limit_bytes``, None for the default: two buffers of each
    block (g, A, B, dA, dB) and the float32 accumulators, plus half."""
    blocks = (tm * tn + tm * tk + tk * tn + tm * tk + tk * tn) * itemsize * 2
    accumulators = (tm * tk + tk * tn) * 4 if scratch else 0
    count = bb * (blocks + accumulators)
    if count + count // 2 <= SCOPED_DEFAULT:
        return None
    return -(-(count + count // 2) // MIB) * MIB


def _kernel(g_ref, b_ref, a_ref, da_ref, db_ref, *scratch, n_steps: int, m_steps: int, one_pass):
    # g [bb, tm, tn]; b [bb, tk, tn]; a [bb, tm, tk]; da [bb, tm, tk]; db [bb, tk, tn]
    acc_da, acc_db = scratch if scratch else (da_ref, db_ref)
    product, step = pl.program_id(1), pl.program_id(2)

    def run(acc, out, contraction_steps: int, dot) -> None:
        c = jax.lax.rem(step, contraction_steps)

        @pl.when(c == 0)
        def _init():
            acc[...] = jnp.zeros_like(acc)

        for i in range(g_ref.shape[0]):  # the batch block, unrolled: one 2-D dot each
            acc[i] += dot(i)

        if scratch:

            @pl.when(c == contraction_steps - 1)
            def _store():
                out[...] = acc[...].astype(out.dtype)

    def cast(x: jax.Array) -> jax.Array:  # float32 as XLA multiplies it at DEFAULT on a TPU
        return x.astype(jnp.bfloat16) if one_pass else x

    def da_dot(i: int) -> jax.Array:  # g [tm, tn] · b [tk, tn]ᵀ
        g, b = cast(g_ref[i]), cast(b_ref[i])
        return jax.lax.dot_general(
            g, b, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32
        )

    def db_dot(i: int) -> jax.Array:  # a [tm, tk]ᵀ · g [tm, tn]
        a, g = cast(a_ref[i]), cast(g_ref[i])
        return jax.lax.dot_general(
            a.T, g, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32
        )

    pl.when(product == 0)(lambda: run(acc_da, da_ref, n_steps, da_dot))
    pl.when(product == 1)(lambda: run(acc_db, db_ref, m_steps, db_dot))


def fused_backward(
    a: jax.Array,  # [B, M, K]
    b: jax.Array,  # [B, K, N]
    g: jax.Array,  # [B, M, N]
    blocks: tuple[int, int, int],  # (tm, tk, tn), dividing (M, K, N)
    bb: int,
    interpret: bool,
) -> tuple[jax.Array, jax.Array]:
    """``(dA, dB)`` in one ``pallas_call``; see the module's docstring for the schedule."""
    from jax.experimental.pallas import tpu as pltpu

    B, M, K = a.shape
    N = b.shape[2]
    tm, tk, tn = blocks
    nm, nk, nn = M // tm, K // tk, N // tn
    last_k, last_n = nk - 1, nn - 1

    # lax.div / lax.rem, not // and %: the steps are never negative, and Python's floor
    # division lowers through a sign that Mosaic's lowering asks the chip's generation for.
    div, rem = jax.lax.div, jax.lax.rem

    def da_step(s):  # (M block, K block, N block) of dA's step s; N, the contraction, fastest
        return div(s, nk * nn), rem(div(s, nn), nk), rem(s, nn)

    def db_step(s):  # (K block, N block, M block) of dB's step s; M, the contraction, fastest
        return div(s, nn * nm), rem(div(s, nm), nn), rem(s, nm)

    def pick(p, first, second):  # scalar select as arithmetic: index maps run on the scalar core
        return first * (1 - p) + second * p

    def g_index(z, p, s):
        i, _, c = da_step(s)
        _, j2, c2 = db_step(s)
        return z, pick(p, i, c2), pick(p, c, j2)

    def b_index(z, p, s):  # dB reads no b: hold dA's last block
        _, j, c = da_step(s)
        return z, pick(p, j, last_k), pick(p, c, last_n)

    def a_index(z, p, s):  # dA reads no a: hold dB's first block
        i2, _, c2 = db_step(s)
        return z, pick(p, 0, c2), pick(p, 0, i2)

    def da_index(z, p, s):  # held at its last block through dB
        i, j, _ = da_step(s)
        return z, pick(p, i, nm - 1), pick(p, j, last_k)

    def db_index(z, p, s):  # held at its first block through dA
        i2, j2, _ = db_step(s)
        return z, pick(p, 0, i2), pick(p, 0, j2)

    scratch = a.dtype != jnp.float32
    return pl.pallas_call(
        functools.partial(
            _kernel,
            n_steps=nn,
            m_steps=nm,
            one_pass=a.dtype == jnp.float32 and not interpret,
        ),
        out_shape=(
            jax.ShapeDtypeStruct((B, M, K), a.dtype),
            jax.ShapeDtypeStruct((B, K, N), a.dtype),
        ),
        grid=(B // bb, 2, nm * nk * nn),
        in_specs=[
            pl.BlockSpec((bb, tm, tn), g_index),
            pl.BlockSpec((bb, tk, tn), b_index),
            pl.BlockSpec((bb, tm, tk), a_index),
        ],
        out_specs=[
            pl.BlockSpec((bb, tm, tk), da_index),
            pl.BlockSpec((bb, tk, tn), db_index),
        ],
        scratch_shapes=(
            [pltpu.VMEM((bb, tm, tk), jnp.float32), pltpu.VMEM((bb, tk, tn), jnp.float32)]
            if scratch
            else []
        ),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "arbitrary", "arbitrary"),
            vmem_limit_bytes=vmem_limit(bb, tm, tk, tn, a.dtype.itemsize, scratch),
        ),
        interpret=interpret,
    )(g, b, a)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def matmul(
    a: jax.Array,  # [M, K] or [B, M, K]
    b: jax.Array,  # [K, N] or [B, K, N]
    block_sizes: BlockSizes | None = None,
    backward_sizes: BlockSizes | None = None,
    vmem_budget: int | None = None,
) -> jax.Array:  # [M, N] or [B, M, N]
    """``matmul_tiled`` with a Pallas backward (``matmul_backward``), tiled by
    ``backward_sizes`` (else ``block_sizes``) per problem dimension; ``vmem_budget`` caps
    the fused backward's VMEM limit (past it, two calls), None for no cap, and is what the
    DMA kernel over large row-major float32 entries may ask for (None: not taken)."""
    return matmul_tiled(a, b, block_sizes=block_sizes, vmem_budget=vmem_budget)


def backward_tiles(tiles: BlockSizes) -> tuple[BlockSizes, BlockSizes]:
    """The two backward products' tiles from tiles per problem dimension (block_m for M,
    block_k for K, block_n for N): ``dA = g·Bᵀ`` is [M,N]x[N,K], ``dB = Aᵀ·g`` [K,M]x[M,N].
    Each block then has the shape of one of the forward's (g's [M,N] block is the output's),
    so a tiling that fits VMEM forward fits backward. On a TPU v5e the best tiles of both
    products at 1024³ bfloat16 are the same per dimension (M 1024, K 128, N 1024:
    benchmarks/tpu_matmul_sweep.py), not the forward's best (K 1024, N 128)."""
    m, k, n = tiles.block_m, tiles.block_k, tiles.block_n
    return BlockSizes(m, n, k), BlockSizes(k, round_up(m, 128), n)


@functools.partial(jax.jit, static_argnames=("tiles", "vmem_budget", "backend", "interpret"))
def matmul_backward(
    a: jax.Array,  # [M, K] or [B, M, K]
    b: jax.Array,  # [K, N] or [B, K, N]
    g: jax.Array,  # [M, N] or [B, M, N], a's dtype
    *,
    tiles: BlockSizes,
    vmem_budget: int | None = None,
    backend: str | None = None,
    interpret: bool | None = None,
) -> tuple[jax.Array, jax.Array]:
    """``(dA, dB)``: float32 arrays the chip stores batch-middle by DMA, each entry whole
    (``entrywise.entrywise_backward``, within ``vmem_budget``); else one fused call
    (``fused_backward``) on a TPU (interpreted on a CPU) when
    the tiles divide the problem and its VMEM limit is within ``vmem_budget`` (None: any),
    else two ``matmul_tiled`` calls (``backward_tiles``, each within the default limit as
    the forward's tiles are); chosen where jax lowers, as ``matmul_tiled`` chooses."""
    if backend is None and interpret is None:
        same = {"tiles": tiles, "vmem_budget": vmem_budget, "backend": "tpu"}
        branches = {
            "cpu": functools.partial(matmul_backward, **same, interpret=True),
            "tpu": functools.partial(matmul_backward, **same, interpret=False),
            # GPUs: the Triton lowering with its own tiles, as matmul_tiled's own branch
            "default": functools.partial(_two_calls, tiles=tiles, backend="gpu", interpret=False),
        }
        return jax.lax.platform_dependent(a, b, g, **branches)
    backend = backend or default_backend()
    *lead, M, K = a.shape
    N = b.shape[-1]
    dma_limit = entrywise.backward_limit(a, b, g, vmem_budget) if backend == "tpu" else None
    if dma_limit is not None:  # float32 the chip stores batch-middle: no relayout copies
        interpret = jax.default_backend() == "cpu" if interpret is None else interpret
        return entrywise.entrywise_backward(a, b, g, vmem_limit=dma_limit, interpret=interpret)
    if backend == "tpu" and lead:  # large row-major float32 entries: every copy in flight
        entry = [(M, K), (K, N), (M, N)], [(M, K), (K, N)]
        row_limit = entrywise.row_major_limit(*entry, lead[0], a.dtype, vmem_budget)
        if row_limit is not None:
            interpret = jax.default_backend() == "cpu" if interpret is None else interpret
            return entrywise.entrywise_backward(
                a, b, g, vmem_limit=row_limit, interpret=interpret, batch_middle=False
            )
    blocks = tiles.within(M, K, N)
    tm, tk, tn = blocks.block_m, blocks.block_k, blocks.block_n
    a3, b3, g3 = (a, b, g) if lead else (a[None], b[None], g[None])
    bb = batch_block(a3.shape[0], tiles, blocks)
    limit = vmem_limit(bb, tm, tk, tn, a.dtype.itemsize, a.dtype != jnp.float32)
    within_budget = limit is None or vmem_budget is None or limit <= vmem_budget
    if backend == "tpu" and fused_fits(M, K, N, tm, tk, tn) and within_budget:
        interpret = jax.default_backend() == "cpu" if interpret is None else interpret
        da, db = fused_backward(a3, b3, g3, (tm, tk, tn), bb, interpret)
        return (da, db) if lead else (da[0], db[0])
    return _two_calls(a, b, g, tiles=tiles, backend=backend, interpret=interpret)


def _two_calls(a, b, g, *, tiles: BlockSizes, backend=None, interpret=None):
    """0.4.0's backward: two ``matmul_tiled`` calls, each read from the stored operands."""
    tiles_da, tiles_db = backward_tiles(tiles)
    if backend == "gpu":
        tiles_da = tiles_db = None  # the GPU lowering's own tiles, as the forward's
    options = {"backend": backend, "interpret": interpret}
    da = matmul_tiled(g, b, block_sizes=tiles_da, transpose_b=True, **options)  # [M,N]x[N,K]
    db = matmul_tiled(a, g, block_sizes=tiles_db, transpose_a=True, **options)  # [K,M]x[M,N]
    return da, db


def _matmul_fwd(a, b, block_sizes, backward_sizes, vmem_budget):
    return matmul_tiled(a, b, block_sizes=block_sizes, vmem_budget=vmem_budget), (a, b)


def _matmul_bwd(block_sizes, backward_sizes, vmem_budget, residuals, g):  # g: [.., M, N]
    a, b = residuals
    tiles = backward_sizes or block_sizes or BlockSizes()
    return matmul_backward(a, b, g.astype(a.dtype), tiles=tiles, vmem_budget=vmem_budget)


matmul.defvjp(_matmul_fwd, _matmul_bwd)


def vmem_budget_of(chip: str | None) -> int:
    """The VMEM the fused backward may ask for on a TPU named as jax names it (``v5e``):
    three quarters of its VMEM, at most 96 MiB. With no chip (a CPU tracing for any TPU:
    ``ci-bench lower``, the tests) the scoped default, which every TPU's VMEM holds, so the
    program traced there fits them all; an unknown name, the same."""
    from jax.experimental.pallas import tpu as pltpu

    try:
        info = pltpu.get_tpu_info_for_chip(pltpu.ChipVersion(chip), 1)
    except (ValueError, TypeError, AttributeError, NotImplementedError):  # None or unknown
        return SCOPED_DEFAULT
    return min(info.vmem_capacity_bytes * 3 // 4, 96 * MIB)
