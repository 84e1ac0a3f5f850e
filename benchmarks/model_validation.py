"""Validate the cost model: hand-computed bytes and VMEM, jax's own kernels, published times.

    python benchmarks/model_validation.py

Prints five tables:

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

Tables 1 and 2 are built in ``model_validation_kernels.py``, table 5 in
``model_validation_shipped.py`` (beside this file); this one builds 3 and 4 and prints all.
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from model_validation_kernels import (
    ADHOC,
    MIB,
    adhoc,
    gla_rows,
    jax_kernel_rows,
    matmul_rows,
    padded,
)
from model_validation_shipped import KIB, shipped_rows, tops_row
from tabulate import tabulate

from ci_bench.measure.model import analyze_case
from ci_bench.measure.model.chips import CHIP_NAMES
from kernels.gla import SPEC as GLA
from kernels.matmul import SPEC as MATMUL

__all__ = [
    "ADHOC",
    "KIB",
    "MIB",
    "PUBLISHED_V5E",
    "adhoc",
    "ci_profile_seconds",
    "gla_rows",
    "guide_kernel",
    "guide_rows",
    "jax_kernel_rows",
    "main",
    "matmul_rows",
    "padded",
    "shipped_rows",
    "tops_row",
]


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
            model = analyze_case(spec, case, list(CHIP_NAMES))
            # float32 matmul runs float32 x float32 dots at DEFAULT precision: partial
            # (model revision 4); everything else is modelled whole.
            f32_default = spec is MATMUL and case.dtype == "float32"
            assert model.status == ("partial" if f32_default else "ok"), model.reason
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
