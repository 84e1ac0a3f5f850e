"""Unit metrics in the pull request (issue 52): the comment job shows what moved, base →
head, from metrics read out of traces recorded on a TPU v5e; an A/B with ``unit-metrics``
on a CPU says in the report why it has none."""

from __future__ import annotations

import json
import subprocess

from jax.profiler import ProfileData

from ci_bench.measure.unit_metrics import read_dumps, read_trace, with_dumps
from ci_bench.pipeline.profiling import ANY_PLATFORM
from ci_bench.report.unit_metrics import moved
from ci_bench.schema.unit_metrics import KernelUnitMetrics
from tests.conftest import run_cli, write_project
from tests.harness import cli_ci
from tests.harness.cli_ci import SMALL, comments, open_pull
from tests.harness.cli_ci_events import pr_env
from tests.test_unit_metrics import CHIP, recorded

server, workspace = cli_ci.server, cli_ci.workspace


def chip_metrics(name: str) -> KernelUnitMetrics:
    (found,) = read_trace(ProfileData.from_text_proto(recorded(name)))
    (whole,) = with_dumps([found], read_dumps(CHIP / f"{name}.llo", [found.kernel]))
    return whole


def test_shrinking_the_tile_moves_the_mxu_and_the_spills():
    """512³ → 128³ tiles, as the chip measured them: only what moved is said."""
    said = moved(chip_metrics("matmul-1024-t128"), chip_metrics("matmul-1024-t512"))
    assert said == [
        "MXU 50 % → 4 %",
        "scalar 16 % → 30 %",
        "vst 17 % → 5 %",
        "valu 9 % → 1 %",
        "spills 87 → 0",
        "fills 257 → 0",
        "vregs 137 → –",
        "bundles 2435 → 218",
    ]  # vld moved 1.6 points: under the 5-point cut; the DMA instructions are the same


def test_the_comment_job_shows_the_moved_metrics_beside_the_slowdown(server, workspace):
    number, head = open_pull(server)
    env = pr_env(server, workspace, number, head)
    done = run_cli("ci", *SMALL, "--no-comment", cwd=workspace, env=env)
    assert done.returncode == 0, done.stderr
    out = workspace / "ci-bench-out"
    report = json.loads((out / "report.json").read_text())
    slower = report["cases"][0]
    slower["unit_metrics"] = {
        "head": [chip_metrics("matmul-1024-t128").model_dump(mode="json")],
        "base": [chip_metrics("matmul-1024-t512").model_dump(mode="json")],
        "note": None,
    }
    (out / "report.json").write_text(json.dumps(report))
    posted = run_cli("ci", "--role", "comment", "--report-dir", str(out), cwd=workspace, env=env)
    assert posted.returncode == 0, posted.stderr
    (comment,) = comments(server, number)
    body = comment.body
    section = body[body.index("Unit metrics of the 1 slower case") :]
    section = section[: section.index("</details>")]
    assert "`matmul_tiled.1`: MXU 50 % → 4 %, scalar 16 % → 30 %" in section
    assert "spills 87 → 0, fills 257 → 0, vregs 137 → –, bundles 2435 → 218" in section
    assert "MXU 4 %: the MXU waits — larger tiles, fewer DMA waits" in section
    assert slower["id"] in section


TOY = """
import dataclasses
from kernels.matmul import SPEC as MATMUL

def pallas(a, b):
    out = MATMUL.pallas(a, b)
    {extra}
    return out

SPEC = dataclasses.replace(MATMUL, name="toy", version="{version}", pallas=pallas)
"""
# 8x the work: at 4x an interpreted A/B on a loaded 2-core CI machine once measured +107 %
# with rounds flipped by noise (p = 0.022: "noisy", not "regression").
EIGHT_TIMES = "out = out + 0.0 * sum(MATMUL.pallas(a * (1 + i / 1e4), b) for i in range(1, 8))"


def test_an_ab_on_a_cpu_with_unit_metrics_says_they_need_a_tpu(tmp_path):
    write_project(tmp_path, ["toy"], "unit-metrics = true\n")

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    (tmp_path / "toy.py").write_text(TOY.format(version="0.1.0", extra="pass"))
    git("add", ".")
    git("commit", "-q", "-m", "base")
    (tmp_path / "toy.py").write_text(TOY.format(version="0.2.0", extra=EIGHT_TIMES))
    git("commit", "-q", "-am", "head")
    out = tmp_path / "report.json"
    case = "toy/B1-M128-K128-N128/float32"
    # 40 rounds: with 20, a loaded 2-core machine's stalls flipped enough rounds that the
    # signed-rank test missed an 8x slowdown (ratio 1.99 [1.33, 2.20], p = 0.1).
    argv = ["ab", "--base", "HEAD~1", "--case", case, "--repeats", "40", "--warmup", "1"]
    done = run_cli(*argv, "-o", str(out), cwd=tmp_path)
    report = json.loads(out.read_text())
    (verdict,) = report["cases"]
    assert verdict["verdict"] == "regression", (done.stdout, verdict["reason"])
    assert verdict["unit_metrics"] == {
        "head": [],
        "base": [],
        "note": "unit metrics need a TPU (this runner: cpu); not collected",
    }
    # The pass as a TPU runner makes it, on this CPU: a worker per side traces the case;
    # the traces are read and hold no TPU kernel (a wrong call would say how it failed).
    env = {ANY_PLATFORM: "1"}
    traced = tmp_path / "traced.json"
    again = run_cli(*argv, "-o", str(traced), cwd=tmp_path, env=env)
    (verdict,) = json.loads(traced.read_text())["cases"]
    assert verdict["verdict"] == "regression", again.stdout
    no_kernel = "this trace holds no Pallas kernel (tpu_custom_call) on a TPU"
    assert verdict["unit_metrics"] == {
        "head": [],
        "base": [],
        "note": f"head: {no_kernel}; base: {no_kernel}",
    }
