"""Roofline PNGs (when matplotlib is installed) and their short case labels."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

from ci_bench.errors import InputError
from ci_bench.measure.roofline import compute_metrics, table_peaks
from ci_bench.report.chart import short_labels
from ci_bench.report.plot import resolve_ceilings, roofline_png
from ci_bench.schema import CaseResult, Results
from tests.harness.factories import V5E, case, results

IDS = (
    "matmul/B1-M128-K128-N128/float32",
    "matmul/B1-M128-K128-N128/bfloat16",
    "matmul/B4-M1024-K1024-N1024/bfloat16",
)


def _with_intensity(c: CaseResult, itemsize: int, peak: float | None = None) -> CaseResult:
    """The factory's case with the matmul byte model, so points spread along the AI axis."""
    p = c.params
    flops = 2 * p["B"] * p["M"] * p["K"] * p["N"]
    bytes_accessed = p["B"] * (p["M"] * p["K"] + p["K"] * p["N"] + p["M"] * p["N"]) * itemsize
    assert c.pallas is not None
    metrics = compute_metrics(
        flops=flops,
        bytes_accessed=bytes_accessed,
        mean_ms=c.pallas.mean_ms,
        peak_tflops=peak,
        peak_gbps=819.0 if peak else None,
    )
    return c.model_copy(update={"metrics": metrics})


def _run(mean_ms: tuple[float, ...], **kwargs: object) -> Results:
    cases = [
        _with_intensity(case(cid, m), 4 if cid.endswith("float32") else 2)
        for cid, m in zip(IDS, mean_ms, strict=True)
    ]
    return results([*cases, case("matmul/B16-M128-K128-N128/float32", status="error")], **kwargs)


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


# ---- roofline -----------------------------------------------------------------------


def test_cpu_roofline_png_with_baseline_is_a_real_image(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "plots" / "roofline.png"
    assert roofline_png(_run((1.0, 0.5, 40.0)), out, baseline=_run((0.8, 0.6, 30.0))) == out
    assert _png_size(out) == (1080, 720)
    assert out.stat().st_size > 20_000


def test_cpu_roofline_draws_points_only_and_says_no_peak_is_known() -> None:
    pytest.importorskip("matplotlib")
    from ci_bench.report.plot import roofline_figure

    fig = roofline_figure(_run((1.0, 0.5, 40.0)), baseline=_run((0.8, 0.6, 30.0)))
    (ax,) = fig.axes
    assert ax.get_title().endswith("(no peak known for cpu)")
    assert ax.get_xscale() == ax.get_yscale() == "log"
    # Three current points in two dtype series, three baseline crosses, one line per pair.
    assert sorted(len(c.get_offsets()) for c in ax.collections) == [1, 2, 3]
    assert len(ax.lines) == 3
    assert len(ax.texts) == 3


def test_tpu_roofline_draws_the_memory_roof_and_the_bf16_compute_roof() -> None:
    pytest.importorskip("matplotlib")
    from ci_bench.report.plot import roofline_figure

    run = _run((1.0, 0.5, 40.0), device=V5E)
    fig = roofline_figure(run, title="v5e", table=table_peaks(run))
    (ax,) = fig.axes
    labels = [line.get_label() for line in ax.lines]
    # jax's own TPU table (pltpu.get_tpu_info_for_chip) gives v5e 820e9 B/s, 197 bf16 TFLOPS
    assert labels == ["memory roof: 820 GB/s", "bfloat16 compute roof: 197 TFLOPS"]
    memory, compute = ax.lines
    assert compute.get_ydata()[0] == 197
    ridge = 197 * 1000 / 820
    assert memory.get_xdata()[-1] == pytest.approx(ridge)
    assert ax.get_title() == "v5e"


def test_given_peaks_draw_one_shared_compute_roof() -> None:
    pytest.importorskip("matplotlib")
    from ci_bench.report.plot import roofline_figure

    fig = roofline_figure(_run((1.0, 0.5, 40.0)), peak_tflops=2.0, peak_gbps=100.0)
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert labels == ["memory roof: 100 GB/s", "bfloat16, float32 compute roof: 2 TFLOPS"]
    assert "no peak" not in fig.axes[0].get_title()


def test_a_run_without_ok_cases_has_nothing_to_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    failed = results([case(IDS[0], status="error")])
    with pytest.raises(InputError, match="nothing to plot"):
        roofline_png(failed, tmp_path / "r.png")


def test_missing_matplotlib_is_a_one_line_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(InputError, match=r"pip install 'ci-bench\[plot\]'"):
        roofline_png(_run((1.0, 0.5, 40.0)), tmp_path / "r.png")
    assert not (tmp_path / "r.png").exists()


def test_peaks_come_from_args_then_recorded_metrics_then_the_device_table() -> None:
    cpu = _run((1.0, 0.5, 40.0))
    assert not resolve_ceilings(cpu, table=table_peaks(cpu)).known
    tpu = _run((1.0, 0.5, 40.0), device=V5E)
    # The device's table comes in as values (report.plot runs no jax).
    table = table_peaks(tpu)
    assert resolve_ceilings(tpu, table=table).tflops == {"bfloat16": 197.0}  # no f32 peak
    assert resolve_ceilings(tpu, table=table).gbps == 820.0  # jax's table, not a recorded one
    given = resolve_ceilings(tpu, peak_tflops=5.0, peak_gbps=50.0, table=table)
    assert given.tflops == {"bfloat16": 5.0, "float32": 5.0}
    assert given.gbps == 50.0
    recorded = results([_with_intensity(case(IDS[1]), 2, peak=123.0)])
    assert resolve_ceilings(recorded, table=table).tflops == {"bfloat16": 123.0}
    assert resolve_ceilings(recorded, table=table).gbps == 819.0


# ---- labels -------------------------------------------------------------------------


def test_mixed_kernels_keep_their_prefix_in_short_labels() -> None:
    assert short_labels(["a/M1/float32", "b/M1/float32"]) == ["a/M1/f32", "b/M1/f32"]
    assert short_labels(['a/M1/"x"']) == ['M1/"x"']
