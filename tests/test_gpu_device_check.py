"""``benchmarks/gpu_device_check.sh`` and its report, on this CPU: the script's arguments and
plan (the GPU run itself needs a GPU: never a test's), and the report's figures from a
run's files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "benchmarks" / "gpu_device_check.sh"
sys.path.insert(0, str(REPO / "benchmarks"))
from gpu_device_report import accuracy, report, spearman  # noqa: E402


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True, check=False
    )


def test_the_dry_run_prints_every_step_in_order_and_runs_nothing(tmp_path):
    out = tmp_path / "never"
    done = _script("--dry-run", "--chip", "b200", "--out", str(out), "--repeats", "5")
    assert done.returncode == 0, done.stderr
    steps = [line.split(":")[0] for line in done.stdout.splitlines() if line.startswith("== ")]
    assert steps == [
        "== install",
        "== versions",
        "== lower",
        "== analyze",
        "== run-wallclock",
        "== run-profiler",
        "== cupti",
        "== report",
    ]
    assert "--no-deps" in done.stdout
    assert "lower --platform cuda --profile smoke --chip b200" in done.stdout
    assert "--timer profiler --repeats 5" in done.stdout
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--chip", "a100"), "--chip wants h100, h200 or b200, got a100"),
        (("--repeats", "0"), "--repeats wants a positive integer"),
        (("--bogus",), "unknown argument --bogus"),
        (("--out",), "--out needs a value"),
        (("--wheels", "/nonexistent"), "no wheels in /nonexistent"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args, says):
    done = _script(*args)
    assert done.returncode == 2
    assert says in done.stderr
    assert "Traceback" not in done.stderr


def _case(case_id: str, ms: float, kernel: str = "matmul", ok: bool = True, **extra):
    return {
        "id": case_id,
        "kernel": kernel,
        "status": "ok",
        "pallas": {"median_ms": ms},
        "correctness": {"ok": ok},
        **extra,
    }


def test_the_report_sets_device_wall_model_and_floor_side_by_side(tmp_path):
    a, b, c = "matmul/A/bfloat16", "matmul/B/bfloat16", "matmul/C/bfloat16"
    dispatch = {"pallas": {"wall_median_ms": 0.05}}
    (tmp_path / "device.json").write_text(
        json.dumps(
            {
                "cases": [
                    _case(a, 0.010, dispatch=dispatch),
                    _case(b, 0.020),
                    _case(c, 0.002, ok=False),
                ]
            }
        )
    )
    (tmp_path / "wall.json").write_text(json.dumps({"cases": [_case(a, 0.040)]}))
    chip = lambda us, floor: {"h200": {"modelled_us": us, "compute_us": floor}}  # noqa: E731
    (tmp_path / "analysis.json").write_text(
        json.dumps(
            {
                "cases": [
                    {"id": a, "status": "ok", "chips": chip(8.0, 4.0)},
                    {"id": b, "status": "ok", "chips": chip(10.0, 5.0)},
                    {"id": c, "status": "partial", "chips": chip(3.0, 3.0)},
                ]
            }
        )
    )
    (tmp_path / "cupti.json").write_text(json.dumps({"cases": {a: 9.5}}))
    text = report(tmp_path, "h200")
    row = next(line for line in text.splitlines() if line.startswith(a))
    # device 10 µs, the same calls' wall 50 µs, a wallclock run's 40 µs, CUPTI 9.5 µs,
    # modelled 8 µs, floor 4 µs: measured 2.5x the floor, correct.
    assert row.split()[1:] == ["10.0", "50.0", "40.0", "9.5", "8.0", "4.0", "2.5x", "yes"]
    assert next(line for line in text.splitlines() if line.startswith(c)).endswith("NO")
    # Only the cases the model times count: a (0.8) and b (0.5); c is partial.
    assert "matmul: 2 points, median 0.65" in text
    assert "cases measured under the tensor-core floor on h200: 1" in text  # c: 2 µs < 3


def test_accuracy_figures_and_spearman():
    assert accuracy([], [], []) == "0 points"
    line = accuracy([1.0, 1.1, 3.0], [1.0, 2.0, 3.0], [1.0, 1.8, 1.0])
    assert line.startswith("3 points, median 1.10")
    assert "within ±25 % 67%" in line
    assert "within ×2 67%" in line
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2], [1, 2]) is None


def test_the_report_refuses_a_folder_without_runs(tmp_path):
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_device_report.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "nothing to report" in done.stderr
    assert Path(tmp_path).exists()
