"""Float32 batched matmul and its backward read in XLA's batch-middle layout, entry by entry.

On a TPU, XLA stores some unaligned batched arrays with the batch axis second minor:
``f32[4, 513, 513]`` as ``{2,0,1:T(4,128)}`` and ``f32[1, 513, 513]`` as
``{2,0,1:T(1,128)}``, so no row is padded from 513 to 520. A ``pallas_call`` takes its
operands row-major, so around the tiled kernel XLA copies both operands in and the result
out: on a TPU v5e those copies were most of B4-513³ float32's 34.4 µs (XLA's own dot: 22.3).

Swapped to ``[M, B, K]`` the same bytes are a row-major array, which XLA passes as a bitcast.
This kernel takes them so, in HBM (``pl.ANY``), and DMAs each batch entry's whole matrices
(``a.at[:, i, :]``: the DMA engine gathers the strided rows) into VMEM, multiplies them (one
bfloat16 pass, as XLA's DEFAULT), and DMAs the product back, the next entry's reads and the
last one's write overlapping the multiply (two buffers; four where an entry is small, since
matmul 0.11.0: ``depth``). On the same chip: B4-513³ float32
24.7 µs, B1-513³ 8.3 µs against XLA's 10.0 (benchmarks/tpu_matmul_batch_middle.py). The
backward (``entrywise_backward``) is the same call over A, B and g, writing dA and dB: the
ci profile's B4-513³ float32 backward 43.0 µs against 61.3 with XLA's copies (XLA: 52.9).

Two other ways measured slower there: XLA's copies with the tiled kernel (above), and
block specs with the batch as each block's middle axis (strided vector loads: 45.4 µs;
bfloat16 six times slower). bfloat16 arrays stored so pack two batch entries' rows into one
word, and Mosaic refuses a DMA of one entry: they keep the tiled kernel and XLA's copies.

``batch_middle=False`` reads row-major ``[B, rows, cols]`` arrays instead, each entry one
contiguous copy and the entries a loop (any B; one body to compile), either dtype. The matmul
does not route to it: ``benchmarks/tpu_matmul_whole_entry.py`` times it against the tiled
kernel on a TPU (the fused tiled backward at B16-1024³ float32 ran 1.25x XLA's there).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

MIB = 1 << 20
# Two buffers of each operand and the product, and the dot's own temporaries (both operands
# in bfloat16, the float32 product), within v5e's 16 MiB scoped default with room to spare.
VMEM_BUDGET = 12 * MIB
# Entries in VMEM at once where they are small: each entry's reads are then a round trip the
# multiply does not hide. On a TPU v5e (benchmarks/tpu_matmul_entrywise_depth.py) B16-127³
# float32 ran 9.1 µs with two and 6.1 with four (XLA: 5.0; eight: 5.8, sixteen: 6.0), its
# backward 12.9 and 9.1 (XLA: 11.2); at 513³ a third entry gained nothing.
DEPTH = 4
# The backward's limit with no budget given (``matmul``'s default): what the fused tiled
# backward may ask for at most (``backward.vmem_budget_of``), so a shape past it falls back.
BACKWARD_CAP = 96 * MIB


def is_batch_middle(layout: str) -> bool:
    """Whether a rank-3 layout as XLA prints it (``{2,0,1:T(4,128)}``) keeps axis 0, the
    batch, second minor: the minor-to-major order starts 2, 0."""
    from ci_bench.measure.model.layouts import parse_major_to_minor

    order = parse_major_to_minor(layout)
    return order is not None and len(order) == 3 and order[1:] == (0, 2)


def default_layout(shape: tuple[int, ...], dtype: jnp.dtype) -> str | None:
    """The layout this process's TPU stores a new array of this shape in, as XLA prints it
    (its client's default); None off a TPU or with a jax whose client cannot tell."""
    from ci_bench.measure import chip

    return chip.printed_layout(tuple(shape), dtype)


def stored_batch_middle(shape: tuple[int, ...], dtype: jnp.dtype) -> bool:
    """Whether this process's TPU stores a new array of this shape batch-middle. False off a
    TPU: a CPU tracing for a TPU (``ci-bench lower``) cannot ask the chip, and takes the
    tiled kernel."""
    layout = default_layout(shape, dtype) if len(shape) == 3 else None
    return layout is not None and is_batch_middle(layout)


def _padded(shape: tuple[int, int]) -> int:
    rows, cols = shape
    return -(-rows // 8) * 8 * (-(-cols // 128) * 128)


def vmem_need(
    inputs: list[tuple[int, int]], outputs: list[tuple[int, int]], buffers: int = 2
) -> int:
    """Bytes of VMEM one float32 entry's matrices take, once per buffer (two counted at B = 1
    too, which allocates one), with the dots' temporaries: the inputs in bfloat16, the
    float32 products (each (8, 128)-tile padded)."""
    held = sum(map(_padded, inputs)) + sum(map(_padded, outputs))
    temporaries = sum(map(_padded, inputs)) // 2 + sum(map(_padded, outputs))
    return 4 * (buffers * held + temporaries)


def depth(batch: int, inputs: list[tuple[int, int]], outputs: list[tuple[int, int]]) -> int:
    """How many entries the kernel keeps in VMEM (its reads run that many less one ahead of
    the multiply): ``DEPTH`` where that many fit ``VMEM_BUDGET``, else two, one at B = 1."""
    deep = min(batch, DEPTH)
    if deep > 2 and vmem_need(inputs, outputs, deep) <= VMEM_BUDGET:
        return deep
    return min(batch, 2)


def fits(M: int, K: int, N: int) -> bool:
    """Whether the forward's entry (``vmem_need``) fits ``VMEM_BUDGET``."""
    return vmem_need([(M, K), (K, N)], [(M, N)]) <= VMEM_BUDGET


def _float32_batch_middle(*shapes: tuple[int, ...], dtype: jnp.dtype) -> bool:
    return dtype == jnp.float32 and all(stored_batch_middle(s, dtype) for s in shapes)


def applies(a: jax.Array, b: jax.Array) -> bool:
    """This kernel serves ``a @ b`` when both are float32 ``[B, M, K]`` / ``[B, K, N]`` the
    chip stores batch-middle, as it stores their product, and an entry fits VMEM."""
    if a.ndim != 3 or b.dtype != a.dtype:
        return False
    B, M, K = a.shape
    N = b.shape[2]
    shapes = ((B, M, K), (B, K, N), (B, M, N))
    return fits(M, K, N) and _float32_batch_middle(*shapes, dtype=a.dtype)


def backward_limit(a: jax.Array, b: jax.Array, g: jax.Array, budget: int | None) -> int | None:
    """The VMEM limit the backward asks for (its need and half again, as the fused tiled
    backward asks: Mosaic's own copies; at least the 16 MiB scoped default), or None when it
    does not serve these arrays: not float32 batch-middle (``applies``' rule, for a, b, g,
    dA and dB) or past ``budget`` (None: ``BACKWARD_CAP``)."""
    if a.ndim != 3 or not (a.dtype == b.dtype == g.dtype):
        return None
    B, M, K = a.shape
    N = b.shape[2]
    if not _float32_batch_middle((B, M, K), (B, K, N), (B, M, N), dtype=a.dtype):
        return None
    inputs, outputs = [(M, K), (K, N), (M, N)], [(M, K), (K, N)]
    buffers = depth(B, inputs, outputs)
    limit = max(vmem_need(inputs, outputs, buffers) * 3 // 2, 16 * MIB)
    return limit if limit <= (BACKWARD_CAP if budget is None else budget) else None


# Row-major float32 entries at least this large in every dimension take this kernel (matmul
# 0.12.0) where a budget is given: on a TPU v5e (benchmarks/tpu_matmul_whole_entry.py) B16-1024³
# float32's backward ran 511 µs against the fused tiled call's 591, B4's 139 against 151, the
# forwards 296-300 against 304 and 77 against 79; at 128³ four entries deep it only tied
# (B16 forward 5.5 against 5.4 µs), bfloat16 within 1.5 % at 1024³: those keep the tiles.
ROW_MAJOR_MIN = 1024


def row_major_limit(
    entry_in: list[tuple[int, int]],
    entry_out: list[tuple[int, int]],
    batch: int,
    dtype: jnp.dtype,
    budget: int | None,
) -> int | None:
    """The VMEM limit this kernel asks for over row-major ``[B, rows, cols]`` arrays (two
    entries in VMEM, its need and half again, at least the 16 MiB scoped default), or None
    where they keep the tiled kernel: not float32, one entry, a matrix under
    ``ROW_MAJOR_MIN`` along a side, no budget given or the limit past it, or any of them
    stored batch-middle (the other path)."""
    sides = [n for shape in entry_in + entry_out for n in shape]
    if dtype != jnp.float32 or batch < 2 or budget is None or min(sides) < ROW_MAJOR_MIN:
        return None
    limit = max(vmem_need(entry_in, entry_out) * 3 // 2, 16 * MIB)
    shapes = [(batch, *shape) for shape in entry_in + entry_out]
    if limit > budget or any(stored_batch_middle(s, dtype) for s in shapes):
        return None
    return limit


@dataclasses.dataclass(frozen=True)
class _Entries:
    """The kernel's refs and schedule: entry i's copies in and out of VMEM slot i % buffers."""

    hbm_in: tuple
    hbm_out: tuple
    vmem_in: tuple
    vmem_out: tuple
    sem: Any
    buffers: int
    batch_axis: int  # 1: [rows, B, cols] arrays; 0: [B, rows, cols]

    def slot(self, i):  # lax.rem for a loop's index: Mosaic lowers Python's % through a sign
        return i % self.buffers if isinstance(i, int) else jax.lax.rem(i, self.buffers)

    def entry(self, ref, i):
        return ref.at[i] if self.batch_axis == 0 else ref.at[:, i, :]

    def reads(self, i) -> list:
        from jax.experimental.pallas import tpu as pltpu

        slot = self.slot(i)
        return [
            pltpu.make_async_copy(self.entry(src, i), dst.at[slot], self.sem.at[j, slot])
            for j, (src, dst) in enumerate(zip(self.hbm_in, self.vmem_in, strict=True))
        ]

    def writes(self, i) -> list:
        from jax.experimental.pallas import tpu as pltpu

        slot, first = self.slot(i), len(self.hbm_in)
        return [
            pltpu.make_async_copy(src.at[slot], self.entry(dst, i), self.sem.at[first + j, slot])
            for j, (src, dst) in enumerate(zip(self.vmem_out, self.hbm_out, strict=True))
        ]

    def multiply(self, i, products, one_pass: bool) -> None:
        """Wait for entry i's reads, then write ``products`` of them (one bfloat16 pass for
        float32 where ``one_pass``, as XLA's DEFAULT on a TPU) into its output slots."""
        slot = self.slot(i)
        _wait(self.reads(i))
        xs = [ref[slot] for ref in self.vmem_in]
        if one_pass and xs[0].dtype == jnp.float32:
            xs = [x.astype(jnp.bfloat16) for x in xs]
        for ref, out in zip(self.vmem_out, products(*xs), strict=True):
            ref[slot] = out.astype(ref.dtype)


def _start(copies: list) -> None:
    for copy in copies:
        copy.start()


def _wait(copies: list) -> None:
    for copy in copies:
        copy.wait()


def _kernel(
    *refs,
    inputs: int,
    outputs: int,
    entries: int,
    buffers: int,
    one_pass: bool,
    products,
    batch_axis: int,
):
    """Entry i of ``[rows, B, cols]`` arrays (``batch_axis`` 1; 0: ``[B, rows, cols]``): DMA
    the inputs in, ``products`` of them (one bfloat16 pass where ``one_pass``), DMA the
    outputs out; refs: the inputs and outputs in HBM, their VMEM buffers, the DMA
    semaphores."""
    vmem = refs[inputs + outputs : -1]
    e = _Entries(
        hbm_in=refs[:inputs],
        hbm_out=refs[inputs : inputs + outputs],
        vmem_in=vmem[:inputs],
        vmem_out=vmem[inputs:],
        sem=refs[-1],
        buffers=buffers,
        batch_axis=batch_axis,
    )

    def step(i) -> None:
        if buffers == 1:  # one entry: in, multiply, out
            _start(e.reads(i))
            e.multiply(i, products, one_pass)
            _start(e.writes(i))
            _wait(e.writes(i))
            return
        ahead = i + buffers - 1  # into the slot entry i - 1's multiply has freed
        pl.when(ahead < entries)(lambda: _start(e.reads(ahead)))
        pl.when(i >= buffers)(lambda: _wait(e.writes(i - buffers)))  # its slots reused now
        e.multiply(i, products, one_pass)
        _start(e.writes(i))

    if buffers > 1:  # the reads run buffers - 1 entries ahead of the multiply
        for i in range(buffers - 1):
            _start(e.reads(i))
    if batch_axis == 1:  # unrolled: B is small where XLA stores arrays so
        for i in range(entries):
            step(i)
    else:  # any B: a loop, one body to compile (sixteen unrolled 1024³ entries took minutes)
        jax.lax.fori_loop(0, entries, lambda i, carry: (step(i), carry)[1], 0)
    if buffers > 1:
        for i in range(max(0, entries - buffers), entries):
            _wait(e.writes(i))


def _dot(x: jax.Array, y: jax.Array, contract: tuple[int, int]) -> jax.Array:
    dims = (((contract[0],), (contract[1],)), ((), ()))
    return jax.lax.dot_general(x, y, dims, preferred_element_type=jnp.float32)


def _forward_products(a: jax.Array, b: jax.Array) -> tuple[jax.Array]:
    return (_dot(a, b, (1, 0)),)


def _backward_products(a: jax.Array, b: jax.Array, g: jax.Array) -> tuple[jax.Array, jax.Array]:
    return _dot(g, b, (1, 1)), _dot(a.T, g, (1, 0))  # dA = g·Bᵀ, dB = Aᵀ·g


def _entrywise(
    products,
    inputs,
    out_shapes,
    interpret: Any,
    vmem_limit: int | None,
    buffers: int | None,
    batch_middle: bool = True,
):
    """``products`` of each batch entry of ``inputs`` (``[B, rows, cols]``), one call, with
    ``buffers`` entries in VMEM at once (None: ``depth``'s); ``interpret``: False on a TPU,
    True or ``pltpu.InterpretParams`` (float32 kept) else; ``batch_middle``: the arrays are
    passed swapped to ``[rows, B, cols]`` (a bitcast of XLA's batch-middle layout), else as
    they are (row-major: each entry one contiguous DMA)."""
    from jax.experimental.pallas import tpu as pltpu

    B = inputs[0].shape[0]
    entry = [tuple(x.shape[1:]) for x in inputs]
    buffers = min(B, buffers or depth(B, entry, list(out_shapes)))
    anywhere = pl.BlockSpec(memory_space=pl.ANY)
    kernel = functools.partial(
        _kernel,
        inputs=len(inputs),
        outputs=len(out_shapes),
        entries=B,
        buffers=buffers,
        one_pass=not interpret,
        products=products,
        batch_axis=1 if batch_middle else 0,
    )
    dtype = inputs[0].dtype
    swap = (lambda x: jnp.swapaxes(x, 0, 1)) if batch_middle else (lambda x: x)
    outs = pl.pallas_call(
        kernel,
        out_shape=[
            jax.ShapeDtypeStruct((r, B, c) if batch_middle else (B, r, c), dtype)
            for r, c in out_shapes
        ],
        in_specs=[anywhere] * len(inputs),
        out_specs=[anywhere] * len(out_shapes),
        scratch_shapes=[
            *(pltpu.VMEM((buffers, *x.shape[1:]), dtype) for x in inputs),
            *(pltpu.VMEM((buffers, *shape), dtype) for shape in out_shapes),
            pltpu.SemaphoreType.DMA((len(inputs) + len(out_shapes), buffers)),
        ],
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=vmem_limit),
        interpret=interpret,
    )(*map(swap, inputs))
    return [swap(out) for out in outs]


@functools.partial(jax.jit, static_argnames=("interpret", "buffers", "vmem_limit", "batch_middle"))
def entrywise_matmul(
    a: jax.Array,
    b: jax.Array,
    *,
    interpret: Any = False,
    buffers: int | None = None,
    vmem_limit: int | None = None,
    batch_middle: bool = True,
) -> jax.Array:
    """``a @ b`` for ``[B, M, K] x [B, K, N]``, each entry whole in VMEM (``fits``, for the
    float32 the matmul routes here)."""
    out_shape = [(a.shape[1], b.shape[2])]
    (out,) = _entrywise(
        _forward_products, [a, b], out_shape, interpret, vmem_limit, buffers, batch_middle
    )
    return out


@functools.partial(jax.jit, static_argnames=("interpret", "vmem_limit", "buffers", "batch_middle"))
def entrywise_backward(
    a: jax.Array,
    b: jax.Array,
    g: jax.Array,
    *,
    vmem_limit: int,
    interpret: Any = False,
    buffers: int | None = None,
    batch_middle: bool = True,
) -> tuple[jax.Array, jax.Array]:
    """``(dA, dB) = (g·Bᵀ, Aᵀ·g)`` for ``[B, M, K]``, ``[B, K, N]``, ``[B, M, N]`` (float32
    where the matmul routes it), each entry's five matrices whole in VMEM (``backward_limit``,
    ``row_major_limit``)."""
    M, K, N = a.shape[1], a.shape[2], b.shape[2]
    outs = [(M, K), (K, N)]
    da, db = _entrywise(
        _backward_products, [a, b, g], outs, interpret, vmem_limit, buffers, batch_middle
    )
    return da, db
