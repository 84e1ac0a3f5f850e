"""The GPU cost model against tokamax's stored NVIDIA measurements (issue 40).

tokamax (Google's Pallas kernel library, Apache-2.0) ships autotuning data: for each op,
argument set and kernel config, the times it measured on an H100 and a B200. A subset is in
``benchmarks/data/tokamax_gpu_autotuning.json`` (provenance inside). Each point's kernel is
tokamax's own Pallas-Triton kernel, imported from the installed package and called as it
ships (only tokamax's "is this device a GPU" check is bypassed: the trace runs on a CPU),
traced as that GPU and modelled by ``analyze --chip``. Printed per family: points,
modelled, median modelled/measured, IQR, within ±25 % and ×2, Spearman.

tokamax is not a ci-bench dependency: ``pip install tokamax==0.0.12`` (it pulls qwix,
einshape, jaxtyping, typeguard, immutabledict, tensorboardx; all install on this CPU).

Usage: python benchmarks/model_validation_gpu_tokamax.py [--family ragged_dot] [--limit N]
       [--block-specs]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
DATA = ROOT / "benchmarks" / "data" / "tokamax_gpu_autotuning.json"


def _shape(text: str) -> tuple[str, tuple[int, ...]]:
    found = re.match(r"(\w+)\[([\d,]*)\]", text)
    assert found, text
    return found.group(1), tuple(int(x) for x in found.group(2).split(",") if x)


def _ragged_dot(point: dict):
    """tokamax's Pallas-Triton ragged dot, group sizes as tokamax benchmarks them
    (``GroupSizes``' representative value from the total size)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from tokamax._src.ops.ragged_dot import base
    from tokamax._src.ops.ragged_dot import pallas_triton as prt

    a = point["args"]
    (_, lhs), (_, rhs) = _shape(a["lhs"]), _shape(a["rhs"])
    groups = a["group_sizes"]
    sizes = (
        base.generate_group_sizes(m=groups["total_size"], num_groups=groups["num_groups"])
        if isinstance(groups, dict)
        else groups
    )
    sizes = np.asarray(sizes, np.int32)
    config = prt.Config(**point["config"])
    # [[1], [2]]: rhs is [groups, n, k]; tokamax's _fwd transposes it with XLA first
    # ("TODO: Fuse transpose into kernel"), outside the kernel the model times.
    transposed = a["ragged_dot_dimension_numbers"]["dot_dimension_numbers"][0][1] == [2]

    def op(x, w):
        w = jnp.swapaxes(w, 1, 2) if transposed else w
        return prt._ragged_dot(
            x,
            w,
            group_sizes=jnp.asarray(sizes),
            ragged_dot_dimension_numbers=base.DEFAULT_RAGGED_DOT_DIM_NUMS,
            precision=jax.lax.Precision.DEFAULT,
            out_dtype=jnp.bfloat16,
            split_k_intermediate_dtype=None,
            config=config,
        )

    flops = 2 * lhs[0] * lhs[1] * (rhs[1] if transposed else rhs[2])
    return op, [lhs, rhs], flops


def _on_cpu(cls):
    """tokamax's op with its device check answering yes (the trace is abstract)."""
    import dataclasses

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Traced(cls):  # type: ignore[misc, valid-type]
        def supported_on(self, device) -> bool:
            return True

    return Traced


def _flash_attention(point: dict):
    from tokamax._src.ops.attention import pallas_triton as pat

    a = point["args"]
    shapes = [_shape(a[k])[1] for k in ("q", "k", "v")]
    if a["bias"] is not None or a["mask"]["bool_mask"] is not None:
        return None  # a bias or a boolean mask: more inputs than q, k, v (not kept)
    op_cls = _on_cpu(pat.PallasTritonFlashAttention)
    op = op_cls(config=pat.Config(**point["config"]))

    def call(q, k, v):
        return op(q, k, v, is_causal=a["mask"]["is_causal"], logits_scale=a["logits_scale"])

    b, t, h, d = shapes[0]
    s, dv = shapes[1][1], shapes[2][3]
    causal = 0.5 if a["mask"]["is_causal"] else 1.0
    flops = int(2 * b * h * t * s * (d + dv) * causal)
    return call, shapes, flops


def _normalization(point: dict):
    from tokamax._src.ops.normalization import pallas_triton as pnt

    a = point["args"]
    x = _shape(a["x"])[1]
    op = _on_cpu(pnt.PallasTritonNormalization)(config=pnt.Config(**point["config"]))

    def call(v):
        import jax.numpy as jnp

        scale = jnp.ones(x[-1], jnp.float32)
        return op(v, scale, scale * 0, axis=a["axis"], epsilon=a["epsilon"])

    return call, [x], 0


BUILDERS = {"ragged_dot": _ragged_dot, "flash_attention": _flash_attention}
BUILDERS["normalization"] = _normalization


def _record_traffic() -> list:
    """The Triton calls' body traffic the next model reads (what crosses L2 to the SMs)."""
    from ci_bench.measure.model import gpu

    seen: list = []
    if not hasattr(gpu, "_unwrapped_traffic"):
        gpu._unwrapped_traffic = gpu.triton_traffic  # type: ignore[attr-defined]
    original = gpu._unwrapped_traffic  # type: ignore[attr-defined]

    def recording(call):
        found = original(call)
        seen.append(found)
        return found

    gpu.triton_traffic = recording
    return seen


def model_point(point: dict) -> tuple[float | None, str, float | None]:
    """The modelled µs of one point on its GPU (None and why when the model is not
    ``ok``), and a partial model's figure without what it could not time."""
    from gpu_op_spec import op_spec

    from ci_bench.contract.spec import Case
    from ci_bench.measure.model import analyze_case
    from ci_bench.measure.model.gputraffic import loaded_bytes

    built = BUILDERS[point["op"]](point)
    if built is None:
        return None, "skipped: inputs beyond q, k, v", None
    op, shapes, flops = built
    keys = {f"s{i}": i + 1 for i in range(len(shapes))}
    spec = op_spec(
        point["op"],
        op,
        lambda c: shapes,
        [keys],
        dtype="bfloat16",
        flops=lambda c: flops or 1,
    )
    seen = _record_traffic()
    model = analyze_case(spec, Case(point["op"], keys, "bfloat16"), [point["gpu"]])
    point["_loaded"] = sum(loaded_bytes(t) for t in seen)
    chip = model.chips.get(point["gpu"])
    if model.status != "ok" or chip is None or chip.modelled_us is None:
        partial = chip.modelled_us if chip is not None else None
        moved = f" [{chip.bound}, {chip.hbm_bytes / 1e9:.2f} GB HBM]" if chip is not None else ""
        return None, f"{model.status}{moved}: {model.reason}", partial
    return (
        chip.modelled_us,
        f"ok ({chip.bound}, {chip.gpu.programs if chip.gpu else '?'} programs, "
        f"{chip.hbm_bytes / 1e9:.2f} GB HBM)",
        None,
    )


def main(argv: list[str] | None = None) -> int:
    from gpu_device_report import accuracy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=sorted(BUILDERS), action="append")
    parser.add_argument("--limit", type=int, default=0, help="points per family and GPU")
    parser.add_argument(
        "--block-specs",
        action="store_true",
        help="read Triton calls' traffic from their block specs, as the model did before "
        "it read their bodies (for comparison)",
    )
    args = parser.parse_args(argv)
    if args.block_specs:
        from ci_bench.measure.model import gpu

        gpu.traffic_of = lambda call: None
    sys.argv = sys.argv[:1]  # tokamax's absl flags parse the command line too
    try:
        import tokamax  # noqa: F401
    except ImportError:
        print("tokamax is not installed: pip install tokamax==0.0.12", file=sys.stderr)
        return 2
    points = json.loads(DATA.read_text())["points"]
    seen: dict[tuple[str, str], int] = {}
    by_family: dict[str, tuple[list[float], list[float], list[float]]] = {}
    totals: dict[str, int] = {}
    print(
        f"{'family, GPU':<20} {'measured µs':>11} {'modelled µs':>11} {'ratio':>6} "
        f"{'L2→SM':>6}  status (L2→SM: the programs' loads / measured, TB/s; "
        "(x): a partial model's figure)"
    )
    for point in points:
        family = f"{point['op']} {point['gpu']}"
        if args.family and point["op"] not in args.family:
            continue
        seen[(point["op"], point["gpu"])] = seen.get((point["op"], point["gpu"]), 0) + 1
        if args.limit and seen[(point["op"], point["gpu"])] > args.limit:
            continue
        totals[family] = totals.get(family, 0) + 1
        measured = point["median_ms"] * 1000
        start = time.perf_counter()
        try:
            modelled, why, partial = model_point(point)
        except Exception as exc:  # a point the model or tokamax cannot trace: said, not hidden
            modelled, partial = None, None
            why = f"error: {type(exc).__name__}: {' '.join(str(exc).split())}"
        shown = "–" if modelled is None else f"{modelled:,.1f}"
        ratio = "–" if modelled is None else f"{modelled / measured:.2f}"
        if partial is not None:
            shown, ratio = f"({partial:,.1f})", f"({partial / measured:.2f})"
        took = time.perf_counter() - start
        l2 = point.get("_loaded", 0) / (measured * 1e-6) / 1e12
        print(
            f"{family:<20} {measured:>11,.1f} {shown:>11} {ratio:>6} {l2:>6.2f}  {why[:100]} "
            f"[{took:.0f}s]"
        )
        if modelled is not None:
            bucket = by_family.setdefault(family, ([], [], []))
            bucket[0].append(modelled / measured)
            bucket[1].append(modelled)
            bucket[2].append(measured)
    print("\nmodelled / measured, per family (points modelled of points tried):")
    for family in sorted(totals):
        ratios, modelled, measured = by_family.get(family, ([], [], []))
        print(
            f"  {family}: {len(ratios)}/{totals[family]} modelled; "
            f"{accuracy(ratios, modelled, measured)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
