"""The TPU model against TPU times nobody here took: tokamax's softmax kernels on TPU 7x.

Source: the tokamax 0.0.12 wheel on PyPI (https://pypi.org/project/tokamax/0.0.12/,
Apache-2.0), files ``tokamax/data/autotuning/tpu7x/pallas_mosaic_tpu_flash_attention.json``,
``.../pallas_mosaic_tpu_linear_softmax_cross_entropy_loss.json`` and their backward
(``..._vjp.json``) files: for each argument set,
the config tokamax's authors kept and its ``evaluation_times_ms`` measured on a TPU 7x. The
points are copied, trimmed (arguments, config, the median of the evaluation times), into
``benchmarks/data/tokamax_tpu_softmax_autotuning.json`` with this provenance; ``--extract
DIR`` regenerates that file from an unzipped wheel (or the installed package's folder).

Each point is modelled from the kernel as tokamax ships it (imported from the installed
tokamax, never copied), traced as the 7x with the point's own config: flash attention
through ``PallasMosaicTpuFlashAttention._fwd`` (splash attention's kernel), the fused linear
+ softmax cross-entropy through ``PallasMosaicTpuLinearSoftmaxCrossEntropyLoss._fwd``, the
backward ones through ``PallasMosaicTpuFlashAttentionVjp._fwd`` (dq, dk, dv) and
``PallasMosaicTpuLinearSoftmaxCrossEntropyLossVjp._fwd`` (dx, dw).
Nothing is fitted to these points: the model's constants are its own (jax's chip table,
the 0.35 µs step cost from jax's matmul guide on v5e, the vector unit's figures in
``ci_bench/measure/model/chips.py``). Per family: points, modelled (``status: ok``), median
modelled/measured, IQR, share within ±25 % and ×2, Spearman. The fused-loss backward's
float32 x float32 dot made its points ``partial`` at model revision 4; since revision 5 it
is priced (1.53 bf16 passes, measured on a TPU v5e) and its points are timed. Run:
``python benchmarks/model_validation_tokamax_softmax.py`` (``--every N``: every Nth point).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data" / "tokamax_tpu_softmax_autotuning.json"
FILES = {
    "pallas_mosaic_tpu_flash_attention.json": "flash attention",
    "pallas_mosaic_tpu_linear_softmax_cross_entropy_loss.json": "fused linear + softmax CE",
    "pallas_mosaic_tpu_flash_attention_vjp.json": "flash attention backward",
    "pallas_mosaic_tpu_linear_softmax_cross_entropy_loss_vjp.json": "fused loss backward",
}
SOURCE = {
    "package": "tokamax 0.0.12 (https://pypi.org/project/tokamax/0.0.12/)",
    "license": "Apache-2.0",
    "files": [f"tokamax/data/autotuning/tpu7x/{f}" for f in FILES],
    "kept": "arguments, config and the median of evaluation_times_ms of every point",
}


def extract(wheel: Path) -> dict:
    """The trimmed points of an unzipped tokamax wheel (``wheel``: the folder above tokamax/)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from model_validation_tokamax import extract as extract_points

    return extract_points(wheel, {"tpu7x": "7x"}, tuple(FILES), SOURCE)


def _shape(text: str) -> tuple[str, tuple[int, ...]]:
    dtype, dims = text.rstrip("]").split("[")
    names = {"bf16": "bfloat16", "f32": "float32", "i32": "int32"}
    return names[dtype], tuple(int(d) for d in dims.split(","))


def _zeros(arrays: list) -> object:
    """A SPEC's make_inputs giving zeros of these (dtype, shape): the point's operands are
    the function's inputs, as a library's callers pass them (the model only traces them;
    made inside, the XLA operations around the kernel would be charged for writing them)."""

    def make(case: object, key: object) -> tuple:
        import jax.numpy as jnp

        return tuple(jnp.zeros(shape, dtype) for dtype, shape in arrays)

    return make


def _attention_options(args: dict, mask: object, presets: tuple) -> dict:
    """The keyword arguments tokamax's attention ops (forward and VJP) share for a point."""
    import jax.numpy as jnp

    return {
        "precision": presets,
        "logits_dtype": jnp.dtype(args["logits_dtype"]),
        "logits_scale": args["logits_scale"],
        "bias": None,
        "logits_soft_cap": args.get("logits_soft_cap"),
        "mask": mask,
        "dropout_mask": None,
        "dropout_rate": 0.0,
        "paging_info": None,
        "q_indices": None,
        "k_indices": None,
    }


def _attention_case(point: dict):
    """A flash attention point as a function of its operands: tokamax's kernel, its config."""
    import jax
    from tokamax._src.ops.attention import base
    from tokamax._src.ops.attention import pallas_mosaic_tpu as tpu

    args = point["args"]
    shapes = {n: _shape(args[n]) for n in ("q", "k", "v")}
    mask = base.Mask(is_causal=bool((args.get("mask") or {}).get("is_causal")))
    presets = tuple(getattr(jax.lax.DotAlgorithmPreset, p) for p in args["precision"])
    op = tpu.PallasMosaicTpuFlashAttention()
    config = tpu.Config(**point["config"])

    def fn(q, k, v):
        out, _ = op._fwd(
            q,
            k,
            v,
            **_attention_options(args, mask, presets),
            normalize_output=bool(args.get("normalize_output", True)),
            return_residuals=bool(args.get("return_residuals")),
            config=config,
        )
        return out

    return fn, _zeros([shapes[n] for n in ("q", "k", "v")])


def _attention_vjp_case(point: dict):
    """A flash attention backward point: tokamax's VJP kernel (dq, dk, dv), its config."""
    import jax
    from tokamax._src.ops.attention import base
    from tokamax._src.ops.attention import pallas_mosaic_tpu_vjp as tpu

    args = point["args"]
    names = ("out", "dout", "q", "k", "v")
    shapes = {n: _shape(args[n]) for n in names}
    residuals = [_shape(r) for r in args["residuals"]]
    mask = base.Mask(is_causal=bool((args.get("mask") or {}).get("is_causal")))
    presets = tuple(getattr(jax.lax.DotAlgorithmPreset, p) for p in args["precision"])
    op = tpu.PallasMosaicTpuFlashAttentionVjp()
    config = tpu.Config(**point["config"])

    def fn(*arrays):
        grads, _ = op._fwd(
            tuple(arrays[: len(residuals)]),
            *arrays[len(residuals) :],
            **_attention_options(args, mask, presets),
            normalize_output=True,
            return_residuals=False,
            config=config,
        )
        return jax.tree.leaves(grads)

    return fn, _zeros([*residuals, *(shapes[n] for n in names)])


def _loss_vjp_case(point: dict):
    """A fused linear + softmax cross-entropy backward point (dx, dw), its config."""
    import jax.numpy as jnp
    from tokamax._src.ops.linear_softmax_cross_entropy_loss import pallas_mosaic_tpu as tpu

    args = point["args"]
    (xdt, xs), (ldt, ls), (wdt, ws) = (_shape(args[n]) for n in ("x", "labels", "w"))
    (rdt, rs), (odt, _) = _shape(args["residuals"][0]), _shape(args["dout"].replace("[]", "[1]"))
    op = tpu.PallasMosaicTpuLinearSoftmaxCrossEntropyLossVjp()
    config = tpu.Config(**point["config"])

    def fn(residual, x, labels, w):
        scalar = jnp.zeros((), odt)
        (dx, _, dw), _ = op._fwd(
            (residual,),
            scalar,
            scalar,
            x,
            labels,
            w,
            reduction=args["reduction"],
            config=config,
            return_residuals=False,
        )
        return dx, dw

    return fn, _zeros([(rdt, rs), (xdt, xs), (ldt, ls), (wdt, ws)])


def _loss_case(point: dict):
    """A fused linear + softmax cross-entropy point as a function of its operands."""
    from tokamax._src.ops.linear_softmax_cross_entropy_loss import pallas_mosaic_tpu as tpu

    args = point["args"]
    (xdt, xs), (ldt, ls), (wdt, ws) = (_shape(args[n]) for n in ("x", "labels", "w"))
    op = tpu.PallasMosaicTpuLinearSoftmaxCrossEntropyLoss()
    config = tpu.Config(**point["config"])

    def fn(x, labels, w):
        loss, _ = op._fwd(
            x,
            labels,
            w,
            reduction=args["reduction"],
            config=config,
            return_residuals=bool(args.get("return_residuals")),
        )
        return loss

    return fn, _zeros([(xdt, xs), (ldt, ls), (wdt, ws)])


BUILDERS = {
    "flash attention": _attention_case,
    "fused linear + softmax CE": _loss_case,
    "flash attention backward": _attention_vjp_case,
    "fused loss backward": _loss_vjp_case,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extract", type=Path, help="an unzipped tokamax wheel: rewrite DATA")
    parser.add_argument("--every", type=int, default=1, help="model every Nth point only")
    parser.add_argument("--verbose", action="store_true", help="one line per point")
    options = parser.parse_args()
    if options.extract:
        DATA.parent.mkdir(exist_ok=True)
        DATA.write_text(json.dumps(extract(options.extract), indent=1) + "\n")
        print(f"wrote {DATA}")
        return
    try:
        import tokamax  # noqa: F401
    except ImportError:
        sys.exit("tokamax is not installed (pip install tokamax==0.0.12): nothing to model")
    sys.path.insert(0, str(Path(__file__).parent))
    from model_validation_kernels import ADHOC, adhoc
    from model_validation_tokamax import _row, floor_line

    from ci_bench.measure.model import analyze_case

    points = json.loads(DATA.read_text())["points"][:: max(options.every, 1)]
    found: dict[str, list[tuple[float, float]]] = {}
    totals: dict[str, int] = {}
    reasons: dict[str, int] = {}
    checked: list[tuple[object, str, float]] = []
    for point in points:
        family = FILES[point["file"]]
        totals[family] = totals.get(family, 0) + 1
        build = BUILDERS[family]
        model = analyze_case(adhoc(*build(point)), ADHOC, ["7x"])
        if model.status != "ok":
            why = (model.reason or model.status)[:160]
            reasons[why] = reasons.get(why, 0) + 1
            if options.verbose:
                print(f"  {family} {point['args']}: {why}")
            continue
        chip = model.chips["7x"]
        modelled = chip.modelled_us / 1e3
        found.setdefault(family, []).append((modelled, point["median_ms"]))
        checked.append((model, "7x", point["median_ms"]))
        if options.verbose:
            shapes = {k: v for k, v in point["args"].items() if k in ("q", "k", "x", "w")}
            print(
                f"  {family} {shapes} {point['config']}: modelled {modelled:.3f} ms "
                f"(MXU {chip.compute_us / 1e3:.3f}, VALU {(chip.vector_us or 0) / 1e3:.3f}, "
                f"EUP {(chip.eup_us or 0) / 1e3:.3f}, HBM {chip.memory_us / 1e3:.3f}, "
                f"{chip.bound}), measured {point['median_ms']:.3f} ms "
                f"({modelled / point['median_ms']:.2f})"
            )
    every = f" (every {options.every}th point)" if options.every > 1 else ""
    print(f"tokamax 0.0.12 on TPU 7x{every}:")
    print(
        "| family | chip | measured points | modelled (ok) | median modelled/measured | IQR "
        "| within ±25 % | within ×2 | Spearman |"
    )
    print("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    for family in FILES.values():
        if family in totals:
            print(_row(family, "7x", found.get(family, []), totals[family]))
    print(floor_line(checked))
    for why, count in sorted(reasons.items(), key=lambda x: -x[1]):
        print(f"not modelled ({count}): {why}")


if __name__ == "__main__":
    main()
