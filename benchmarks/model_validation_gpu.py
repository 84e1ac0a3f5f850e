"""The GPU cost model against published GPU measurements of Pallas kernels (issue 40).

Each published point: the source, the GPU, the kernel as jax ships it, the measured time;
the model's figure for that kernel traced as that GPU, or why it has none. Then, over the
points the model times, modelled/measured: median, IQR, share within ±25 % and ×2, and
Spearman's rank correlation, per family (benchmarks/gpu_device_report.py's ``accuracy``).

Usage: python benchmarks/model_validation_gpu.py
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


@dataclass(frozen=True)
class Point:
    source: str
    family: str
    gpu: str
    m: int
    k: int
    n: int
    measured_us: float
    kernel: str  # which of jax's ops models it


def _points() -> list[Point]:
    flops = 2 * 4096 * 4096 * 8192
    # docs/pallas/gpu/blackwell_matmul.md (jax): TensorCore utilization per step, B200,
    # f16 m=4096 k=4096 n=8192 (the cutlass_profiler line of the same page); time =
    # FLOPs / (utilization x 2,250 TFLOPS, the page's own peak in blackwell_matmul_mgpu.main).
    steps = {
        "0 basic": 37.62,
        "1 warp specialization": 45.47,
        "2 tiled epilogue": 55.82,
        "3 collective MMA": 59.41,
        "4 persistent": 61.46,
        "5 epilogue warpgroup": 63.38,
        "6 grid tiling": 69.44,
    }
    found = [
        Point(
            f"jax blackwell_matmul.md, step {name}",
            "mosaic_gpu matmul",
            "b200",
            4096,
            4096,
            8192,
            flops / (util / 100 * 2.25e15) * 1e6,
            "blackwell",
        )
        for name, util in steps.items()
    ]
    # docs/pallas/gpu/collective_matmul.md (jax): "f16 matmul with M=1024, K=4096 and
    # N=4096 ... about 43us on a single H100".
    found.append(
        Point(
            "jax collective_matmul.md, single H100",
            "mosaic_gpu matmul",
            "h100",
            1024,
            4096,
            4096,
            43.0,
            "hopper",
        )
    )
    return found


def _model(point: Point):
    import jax.numpy as jnp
    from gpu_op_spec import op_spec  # tests/fixtures, put on the path below
    from jax.experimental.pallas.ops.gpu import blackwell_matmul_mgpu as bm
    from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu as hm

    from ci_bench.contract.spec import Case
    from ci_bench.measure.model import analyze_case

    if point.kernel == "blackwell":
        config = bm.TuningConfig(
            tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=4, collective=False
        )
        op = lambda a, b: bm.matmul_kernel(a, b, config)  # noqa: E731
    else:
        config = hm.TuningConfig(tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=4)
        op = lambda a, b: hm.matmul(a, b, None, config)  # noqa: E731
    spec = op_spec(
        "published",
        op,
        lambda c: [(c["M"], c["K"]), (c["K"], c["N"])],
        [{"M": point.m, "K": point.k, "N": point.n}],
        flops=lambda c: 2 * c["M"] * c["K"] * c["N"],
    )
    del jnp
    case = Case("published", {"M": point.m, "K": point.k, "N": point.n}, "float16")
    return analyze_case(spec, case, [point.gpu])


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures"))
    from gpu_device_report import accuracy

    by_family: dict[str, tuple[list[float], list[float], list[float]]] = {}
    print(f"{'published point':<52} {'GPU':<5} {'measured µs':>11} {'modelled µs':>11}  status")
    for point in _points():
        model = _model(point)
        chip = model.chips.get(point.gpu)
        modelled = chip.modelled_us if chip is not None and model.status == "ok" else None
        shown = "–" if modelled is None else f"{modelled:,.1f}"
        why = model.status if model.status == "ok" else f"{model.status}: {model.reason}"
        print(
            f"{point.source:<52} {point.gpu:<5} {point.measured_us:>11,.1f} {shown:>11}  {why[:90]}"
        )
        if modelled is not None:
            bucket = by_family.setdefault(point.family, ([], [], []))
            bucket[0].append(modelled / point.measured_us)
            bucket[1].append(modelled)
            bucket[2].append(point.measured_us)
    print("\nmodelled / measured, per family:")
    families = {p.family for p in _points()}
    for family in sorted(families):
        ratios, modelled, measured = by_family.get(family, ([], [], []))
        print(f"  {family}: {accuracy(ratios, modelled, measured)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
