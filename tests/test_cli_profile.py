"""``ci-bench profile`` and ``ci-bench plot`` as a user runs them."""

from __future__ import annotations

import pytest

from ci_bench.errors import ExitCode
from tests.conftest import run_cli

CASE = "matmul/B1-M127-K513-N255/bfloat16"


def test_profile_writes_an_xplane_trace_and_prints_the_peak_buffer_table(tmp_path, project):
    out = tmp_path / "prof"
    done = run_cli(
        "profile",
        "--kernel",
        "matmul",
        "--case",
        CASE,
        "--out",
        str(out),
        "--dump-hlo",
        cwd=project,
    )
    assert done.returncode == 0, done.stderr
    traces = list((out / "trace" / "plugins" / "profile").glob("*/*.xplane.pb"))
    assert len(traces) == 1
    assert traces[0].stat().st_size > 1000
    assert f"xprof --logdir={out / 'trace'}" in done.stdout
    assert "buffer-assignment.txt" in done.stdout
    assert "temporary buffer" in done.stdout
    # the zero-padded unaligned operand: K in 2 blocks of 384, N one whole 255 block (0.8.0)
    assert "bf16[1,768,255]" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kernel", "matmul", "--case", "matmul/x/float32"], "parameters must look like"),
        (["--kernel", "matmul"], "profile needs a --case ID"),
        (["--kernel", "nope", "--case", CASE], "unknown kernel 'nope'"),
        (["--kernel", "matmul", "--kernel", "gla", "--case", CASE], "at most one --kernel"),
    ],
)
def test_profile_rejects_bad_selections_in_one_line(tmp_path, project, args, message):
    done = run_cli("profile", *args, "--out", str(tmp_path / "p"), cwd=project)
    assert done.returncode == ExitCode.USAGE
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_plot_writes_a_png(tmp_path, project):
    pytest.importorskip("matplotlib")
    from tests.harness.factories import case, results

    path = tmp_path / "r.json"
    path.write_text(results([case("matmul/B1-M128-K128-N128/float32")]).model_dump_json())
    png = tmp_path / "roofline.png"
    done = run_cli("plot", str(path), "--out", str(png), "--baseline", str(path), cwd=project)
    assert done.returncode == 0, done.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000
