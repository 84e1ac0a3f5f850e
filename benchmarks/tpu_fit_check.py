"""Does the model's VMEM fit agree with the TPU compiler? Kernels the model was not fitted on.

Issue 51 asks the cost model's fit ("fits v5e" or not) to agree with the compiler. The
matmul probe (``tpu_vmem_probe.py``) reads the project's forward, where the model's VMEM
rule was worked out; this script holds that rule to kernels it was not worked out on, near
where they stop fitting: jax's flash attention, splash attention and megablox gmm as
shipped (large blocks, bfloat16 and float32), the project's fused matmul backward, and the
public GLA the specification's kernel family names (``tops``, when a checkout of
github primatrix/pallas-kernel is on ``PYTHONPATH``; its rows say so when it is not).

Each point is compiled for the chip by libtpu with nothing run: on a TPU host against its
own chip, or on any host with libtpu installed against a topology (``--deviceless v5e``,
``tpu_deviceless.py``). The kernel's own ``vmem_limit_bytes`` applies, else the chip's
scoped default; a refusal's words name the allocation that passed it. Beside each, the
model's ``fits`` and VMEM count for the same chip (``analyze_case``, traced on this CPU).

    python benchmarks/tpu_fit_check.py --deviceless v5e --out OUT [--only flash,gmm]
    python benchmarks/tpu_fit_check.py --render OUT/fit_check.json [--remodel]

``--remodel`` sets this checkout's model beside the compiler's stored answers (they do not
move with the model), so a model change is checked on any host in seconds per point.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for _path in (str(HERE.parent), str(HERE)):  # the repository (kernels, ci_bench), benchmarks
    if _path not in sys.path:
        sys.path.insert(0, _path)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

MIB = 1 << 20
TPU_OPS = "jax.experimental.pallas.ops.tpu."
BF16, F32 = "bfloat16", "float32"
Built = tuple[Callable[..., Any], tuple[Any, ...]]


def _arrays(shapes: list[tuple[int, ...]], dtype: str) -> tuple[jax.Array, ...]:
    """Zeros: the model reads shapes only, and so does the compiler (no value is used)."""
    return tuple(jnp.zeros(s, jnp.dtype(dtype)) for s in shapes)


def flash(seq: int, head_dim: int, dtype: str, bq: int, bk_major: int, bk: int) -> Built:
    """jax's flash attention forward, [1, 8, seq, head_dim], non-causal."""
    fa = importlib.import_module(TPU_OPS + "flash_attention")
    blocks = fa.BlockSizes(block_q=bq, block_k_major=bk_major, block_k=bk, block_b=1)
    fn = functools.partial(fa.flash_attention, sm_scale=head_dim**-0.5, block_sizes=blocks)
    return fn, _arrays([(1, 8, seq, head_dim)] * 3, dtype)


def splash(seq: int, dtype: str, bq: int, bkv: int, bkv_compute: int) -> Built:
    """jax's splash attention MHA, 8 heads of 128, a causal mask."""
    sp = importlib.import_module(TPU_OPS + "splash_attention.splash_attention_kernel")
    spm = importlib.import_module(TPU_OPS + "splash_attention.splash_attention_mask")
    mask = spm.MultiHeadMask([spm.CausalMask((seq, seq)) for _ in range(8)])
    blocks = sp.BlockSizes(block_q=bq, block_kv=bkv, block_kv_compute=bkv_compute)
    kernel = sp.make_splash_mha_single_device(mask, block_sizes=blocks)
    return (lambda q, k, v: kernel(q, k, v)), _arrays([(8, seq, 128)] * 3, dtype)


def gmm(m: int, k: int, n: int, dtype: str, tiles: tuple[int, int, int]) -> Built:
    """megablox gmm: [m, k] x [8, k, n], eight equal groups."""
    mb = importlib.import_module(TPU_OPS + "megablox.gmm")
    sizes = jnp.full((8,), m // 8, jnp.int32)
    lhs, rhs = _arrays([(m, k), (8, k, n)], dtype)
    return functools.partial(mb.gmm, tiling=tiles), (lhs, rhs, sizes)


def matmul_backward(size: int, dtype: str, tiles: tuple[int, int, int], chip: str) -> Built:
    """The project's fused backward (dA and dB in one call), its limit as on ``chip``: the
    backward alone (under ``jax.vjp`` the model would count the forward that XLA drops)."""
    from kernels.matmul import BlockSizes
    from kernels.matmul.backward import matmul_backward, vmem_budget_of

    fn = functools.partial(
        matmul_backward, tiles=BlockSizes(*tiles), vmem_budget=vmem_budget_of(chip)
    )
    return fn, _arrays([(1, size, size)] * 3, dtype)


def tops_gla(shape: tuple[int, int, int, int], dtype: str, chunk: int) -> Built:
    """The public chunked GLA of github primatrix/pallas-kernel (``tops.ops.gla.chunk_gla``,
    as it ships; importable only where a checkout of it is on the path): q, k, v, g
    [B, T, H, K]. Its Pallas calls ask for 32 MiB of VMEM themselves."""
    import tops.ops.utils  # type: ignore[import-not-found]
    from tops.ops.gla import chunk_gla  # type: ignore[import-not-found]

    # tops interprets its kernels wherever jax's devices are not TPUs (``is_tpu_runtime``,
    # cached): compiled for a chip from a host without one, it must take the chip's path.
    tops.ops.utils._IS_TPU_RUNTIME_CACHED = True
    fn = functools.partial(chunk_gla, chunk_size=chunk)
    return (lambda q, k, v, g: fn(q, k, v, g)[0]), _arrays([shape] * 4, dtype)


BIG = (512, 1024, 2048)
POINTS: dict[str, list[tuple[Any, ...]]] = {
    "flash": [
        (seq, d, dtype, bq, bkm, bk)
        for seq, d in ((4096, 128), (4096, 256))
        for dtype in (BF16, F32)
        for bq, bkm, bk in ((512, 512, 512), (1024, 1024, 512), (1024, 1024, 1024),
                            (2048, 2048, 512), (2048, 2048, 1024), (2048, 2048, 2048))
    ],
    "splash": [
        (4096, dtype, bq, bkv, bkc)
        for dtype in (BF16, F32)
        for bq in BIG
        for bkv, bkc in ((1024, 512), (2048, 1024), (2048, 2048))
    ],
    "gmm": [
        (8192, k, n, dtype, tiles)
        for k, n in ((4096, 4096),)
        for dtype in (BF16, F32)
        for tiles in ((512, 1024, 1024), (1024, 1024, 1024), (1024, 2048, 1024),
                      (1024, 2048, 2048), (2048, 2048, 1024), (2048, 2048, 2048),
                      (2048, 4096, 1024), (1024, 4096, 2048))
    ],
    "matmul_backward": [
        (size, dtype, tiles)
        for size in (2048, 4096)
        for dtype in (BF16, F32)
        for tiles in ((512, 512, 512), (512, 1024, 1024), (1024, 512, 1024),
                      (1024, 1024, 1024), (1024, 2048, 1024), (2048, 1024, 1024))
    ],
    "tops_gla": [
        (shape, dtype, chunk)
        for shape in ((1, 1024, 4, 128), (2, 4096, 8, 128), (1, 4096, 4, 256))
        for dtype in (BF16, F32)
        for chunk in (64, 128, 256)
    ],
}  # fmt: skip
BUILDERS: dict[str, Callable[..., Built]] = {
    "flash": flash,
    "splash": splash,
    "gmm": gmm,
    "matmul_backward": matmul_backward,
    "tops_gla": tops_gla,
}


def build(family: str, point: list[Any] | tuple[Any, ...], chip: str) -> Built:
    """A point's function and inputs (the backward's VMEM budget is the chip's; a point
    read back from JSON has lists where the builders take tuples)."""
    args = [tuple(p) if isinstance(p, list) else p for p in point]
    extra = (chip,) if family == "matmul_backward" else ()
    return BUILDERS[family](*args, *extra)


def compiled(fn: Callable[..., Any], args: tuple[Any, ...], target: Any) -> dict[str, Any]:
    """Whether libtpu compiles ``fn`` for the target's chip as the kernel sets its limit,
    and the scoped VMEM Mosaic allocates (``tpu_vmem_probe.search_need``: every call's limit
    raised in turn; caches cleared before each compile, as jax's kernels are jitted and a
    cached trace would keep its first limit)."""
    from tpu_vmem_probe import compile_message, search_need

    shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=target) for a in args]

    def compiles_at(limit: int | None) -> str | None:
        jax.clear_caches()
        return compile_message(fn, shapes, limit)

    message = compiles_at(None)
    row: dict[str, Any] = {"compiles": message is None}
    if message is not None:
        row["message"] = message[-400:]
    return row | search_need(compiles_at, 1 / 16)


def modelled(fn: Callable[..., Any], args: tuple[Any, ...], chip: str) -> dict[str, Any]:
    from model_validation_kernels import ADHOC, adhoc

    from ci_bench.measure.model import analyze_case

    model = analyze_case(adhoc(fn, lambda c, k, a=args: a), ADHOC, [chip])
    if model.status != "ok" and not model.chips:
        return {"model_status": model.status, "model_reason": model.reason}
    figure = model.chips[chip]
    return {
        "model_status": model.status,
        "model_fits": figure.fits,
        "model_vmem_mib": round(figure.vmem_bytes / MIB, 3),
        "limit_mib": round(figure.vmem_limit_bytes / MIB, 3),
    }


def check(family: str, point: tuple[Any, ...], chip: str, target: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"family": family, "point": list(point)}
    began = time.monotonic()
    try:
        fn, args = build(family, point, chip)
        row.update(modelled(fn, args, chip))
        row.update(compiled(fn, args, target))
    except Exception as exc:  # a point that cannot be built or modelled says why
        row["error"] = " ".join(str(exc).split())[:300]
    if "compiles" in row and "model_fits" in row:
        row["agrees"] = row["compiles"] == row["model_fits"]
    row["seconds"] = round(time.monotonic() - began, 1)
    return row


def measure(opts: argparse.Namespace) -> int:
    from tpu_microbench import provenance
    from tpu_vmem_probe import install_limit_override

    install_limit_override()
    target = None
    if opts.deviceless:
        import tpu_deviceless

        target = tpu_deviceless.target(opts.deviceless)
    chip = opts.deviceless or opts.chip
    record: dict[str, Any] = {"provenance": provenance(), "chip": chip, "rows": []}
    record["provenance"]["script"] = "benchmarks/tpu_fit_check.py"
    if opts.deviceless:
        record["provenance"]["compiled_for"] = tpu_deviceless.compiled_for(opts.deviceless, target)
    opts.out.mkdir(parents=True, exist_ok=True)
    out = opts.out / "fit_check.json"
    deadline = time.monotonic() + opts.deadline
    for family in opts.only.split(","):
        for point in POINTS[family]:
            if time.monotonic() > deadline:
                break
            row = check(family, point, chip, target)
            record["rows"].append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "message"}), flush=True)
            out.write_text(json.dumps(record, indent=1))
    print(summary(record["rows"]))
    return 0


def summary(rows: list[dict[str, Any]]) -> str:
    from tabulate import tabulate

    table = []
    for family in dict.fromkeys(r["family"] for r in rows):
        mine = [r for r in rows if r["family"] == family and "agrees" in r]
        false_fit = sum(r["model_fits"] and not r["compiles"] for r in mine)
        false_misfit = sum(r["compiles"] and not r["model_fits"] for r in mine)
        compiles = sum(r["compiles"] for r in mine)
        errors = sum(r["family"] == family and "agrees" not in r for r in rows)
        table.append([family, len(mine), compiles, false_fit, false_misfit, errors])
    headers = ["family", "points", "compile", "false fit", "false misfit", "not checked"]
    return tabulate(table, headers=headers)


def remodelled(row: dict[str, Any], chip: str) -> dict[str, Any]:
    """``row`` with the model's columns from this checkout's model (the compiler's stay:
    they do not move with the model)."""
    fn, args = build(row["family"], row["point"], chip)
    fresh = {k: v for k, v in row.items() if not k.startswith("model_") and k != "agrees"}
    fresh.update(modelled(fn, args, chip))
    if "compiles" in fresh and "model_fits" in fresh:
        fresh["agrees"] = fresh["compiles"] == fresh["model_fits"]
    return fresh


def render(path: Path, remodel: bool = False) -> int:
    from tabulate import tabulate

    record = json.loads(path.read_text())
    rows = record["rows"]
    if remodel:
        rows = [remodelled(r, record["chip"]) if "compiles" in r else r for r in rows]
    shown = [
        [r["family"], " ".join(map(str, r["point"])), r.get("model_vmem_mib"), r.get("limit_mib"),
         r.get("model_fits"), r.get("compiles"), r.get("needs_mib", ""),
         {True: "yes", False: "NO"}.get(r.get("agrees"), r.get("error", "")[:60])]
        for r in rows
    ]  # fmt: skip
    headers = ["family", "point", "model MiB", "limit", "model fits", "compiles", "needs", "agree"]
    print(tabulate(shown, headers=headers))
    print(summary(rows))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", default=",".join(POINTS), help="comma-separated families")
    parser.add_argument("--deviceless", choices=("v5e", "v6e"), help="compile with libtpu, no TPU")
    parser.add_argument("--chip", default="v5e", help="the model's chip on a TPU host")
    parser.add_argument("--deadline", type=float, default=3000.0)
    parser.add_argument("--render", type=Path, help="a fit_check.json to print")
    parser.add_argument("--remodel", action="store_true", help="with --render: model anew")
    opts = parser.parse_args()
    if opts.render:
        return render(opts.render, opts.remodel)
    if opts.out is None:
        parser.error("--out is required to check")
    return measure(opts)


if __name__ == "__main__":
    raise SystemExit(main())
