"""The matmul of float32 arrays XLA stores batch-middle, one batch entry at a time by DMA.

On a TPU, XLA stores some unaligned batched arrays with the batch axis second minor:
``f32[4, 513, 513]`` as ``{2,0,1:T(4,128)}`` and ``f32[1, 513, 513]`` as
``{2,0,1:T(1,128)}``, so no row is padded from 513 to 520. A ``pallas_call`` takes its
operands row-major, so around the tiled kernel XLA copies both operands in and the result
out: on a TPU v5e those copies were most of B4-513³ float32's 34.4 µs (XLA's own dot: 22.3).

Swapped to ``[M, B, K]`` the same bytes are a row-major array, which XLA passes as a bitcast.
This kernel takes them so, in HBM (``pl.ANY``), and DMAs each batch entry's whole matrices
(``a.at[:, i, :]``: the DMA engine gathers the strided rows) into VMEM, multiplies them (one
bfloat16 pass, as XLA's DEFAULT), and DMAs the product back, the next entry's reads and the
last one's write overlapping the multiply (two buffers). On the same chip: B4-513³ float32
24.7 µs, B1-513³ 8.3 µs against XLA's 10.0 (benchmarks/tpu_matmul_batch_middle.py).

Two other ways measured slower there: XLA's copies with the tiled kernel (above), and
block specs with the batch as each block's middle axis (strided vector loads: 45.4 µs;
bfloat16 six times slower). bfloat16 arrays stored so pack two batch entries' rows into one
word, and Mosaic refuses a DMA of one entry: they keep the tiled kernel and XLA's copies.
"""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

MIB = 1 << 20
# Two buffers of each operand and the product, and the dot's own temporaries (both operands
# in bfloat16, the float32 product), within v5e's 16 MiB scoped default with room to spare.
VMEM_BUDGET = 12 * MIB


def is_batch_middle(layout: str) -> bool:
    """Whether a rank-3 layout as XLA prints it (``{2,0,1:T(4,128)}``) keeps axis 0, the
    batch, second minor: the minor-to-major order starts 2, 0."""
    found = re.match(r"\{(\d+),(\d+),(\d+)", layout.replace(" ", ""))
    return bool(found) and found.group(1, 2) == ("2", "0")


def stored_batch_middle(shape: tuple[int, ...], dtype: jnp.dtype) -> bool:
    """Whether this process's TPU stores a new array of this shape batch-middle (its client's
    default layout). False off a TPU: a CPU tracing for a TPU (``ci-bench lower``) cannot ask
    the chip, and takes the tiled kernel."""
    if len(shape) != 3 or jax.default_backend() != "tpu":
        return False
    device = jax.devices()[0]
    layout = device.client.get_default_layout(jnp.dtype(dtype), tuple(shape), device)
    return is_batch_middle(str(layout))


def _padded(rows: int, cols: int) -> int:
    return -(-rows // 8) * 8 * (-(-cols // 128) * 128)


def fits(M: int, K: int, N: int) -> bool:
    """Whether one float32 entry's three matrices, twice, and the dot's temporaries fit
    ``VMEM_BUDGET`` (each padded to (8, 128) tiles)."""
    operands = _padded(M, K) + _padded(K, N) + _padded(M, N)
    temporaries = (_padded(M, K) + _padded(K, N)) // 2 + _padded(M, N)
    return 4 * (2 * operands + temporaries) <= VMEM_BUDGET


def applies(a: jax.Array, b: jax.Array) -> bool:
    """This kernel serves ``a @ b`` when both are float32 ``[B, M, K]`` / ``[B, K, N]`` the
    chip stores batch-middle, as it stores their product, and an entry fits VMEM."""
    if a.ndim != 3 or a.dtype != jnp.float32 or b.dtype != jnp.float32:
        return False
    B, M, K = a.shape
    N = b.shape[2]
    shapes = ((B, M, K), (B, K, N), (B, M, N))
    return fits(M, K, N) and all(stored_batch_middle(s, a.dtype) for s in shapes)


def _kernel(a_hbm, b_hbm, o_hbm, a_v, b_v, o_v, sem, *, entries: int, buffers: int, one_pass: bool):
    """Entry i of ``[M, B, K] x [K, B, N] -> [M, B, N]``: DMA in, multiply, DMA out."""
    from jax.experimental.pallas import tpu as pltpu

    def copy(src, dst, which: int, slot: int):
        return pltpu.make_async_copy(src, dst, sem.at[which, slot])

    def reads(i: int):
        slot = i % buffers
        return (
            copy(a_hbm.at[:, i, :], a_v.at[slot], 0, slot),
            copy(b_hbm.at[:, i, :], b_v.at[slot], 1, slot),
        )

    def write(i: int):
        slot = i % buffers
        return copy(o_v.at[slot], o_hbm.at[:, i, :], 2, slot)

    def multiply(i: int) -> None:
        slot = i % buffers
        for read in reads(i):
            read.wait()
        a, b = a_v[slot], b_v[slot]
        if one_pass:  # as XLA multiplies float32 at DEFAULT on a TPU (on a CPU: float32)
            a, b = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
        o_v[slot] = jnp.dot(a, b, preferred_element_type=jnp.float32)

    if buffers == 1:  # one entry: in, multiply, out
        for i in range(entries):
            for read in reads(i):
                read.start()
            multiply(i)
            write(i).start()
            write(i).wait()
        return
    for read in reads(0):
        read.start()
    for i in range(entries):  # unrolled: B is small where XLA stores arrays so
        if i + 1 < entries:
            for read in reads(i + 1):
                read.start()
        if i >= buffers:
            write(i - buffers).wait()  # its buffer is reused now
        multiply(i)
        write(i).start()
    for i in range(max(0, entries - buffers), entries):
        write(i).wait()


@functools.partial(jax.jit, static_argnames=("interpret",))
def entrywise_matmul(a: jax.Array, b: jax.Array, *, interpret: bool = False) -> jax.Array:
    """``a @ b`` for float32 ``[B, M, K] x [B, K, N]``, each entry whole in VMEM (``fits``)."""
    from jax.experimental.pallas import tpu as pltpu

    B, M, K = a.shape
    N = b.shape[2]
    buffers = min(B, 2)  # one entry needs no second buffer
    anywhere = pl.BlockSpec(memory_space=pl.ANY)
    out = pl.pallas_call(
        functools.partial(_kernel, entries=B, buffers=buffers, one_pass=not interpret),
        out_shape=jax.ShapeDtypeStruct((M, B, N), a.dtype),
        in_specs=[anywhere, anywhere],
        out_specs=anywhere,
        scratch_shapes=[
            pltpu.VMEM((buffers, M, K), a.dtype),
            pltpu.VMEM((buffers, K, N), a.dtype),
            pltpu.VMEM((buffers, M, N), a.dtype),
            pltpu.SemaphoreType.DMA((3, buffers)),
        ],
        interpret=interpret,
    )(jnp.swapaxes(a, 0, 1), jnp.swapaxes(b, 0, 1))
    return jnp.swapaxes(out, 0, 1)
