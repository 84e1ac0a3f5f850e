"""What a terminal shows, through the real CLI: within 120 columns, the interpreter said."""

from __future__ import annotations

from tests.conftest import run_cli

QUICK = ("--repeats", "3", "--warmup", "1", "--quiet", "--no-compilation-cache")
CASE = "matmul/B1-M127-K513-N255/bfloat16/backward"


def test_run_and_compare_fit_120_columns_and_say_the_times_are_the_interpreters(project):
    out = project / "r.json"
    done = run_cli("run", "--case", CASE, *QUICK, "--output", str(out), cwd=project)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 120
    assert lines[0].startswith("† CPU interpreter — times are not kernel performance")
    header = next(line for line in lines if line.startswith("case"))
    assert "speedup†" in header
    assert "TFLOPS†" in header
    assert any(line.startswith("matmul/B1-M127-K513-N255/bfloat16") for line in lines)
    wide = run_cli("run", "--case", CASE, *QUICK, "--wide", cwd=project)
    assert wide.returncode == 0, wide.stderr
    header = next(line for line in wide.stdout.splitlines() if line.startswith("case"))
    assert "compile ms" in header
    compared = run_cli("compare", str(out), "--baselines-dir", str(project), cwd=project)
    assert compared.returncode == 0, compared.stderr
    shown = compared.stdout.splitlines()
    assert max(len(line) for line in shown) <= 120
    assert shown[0].startswith("† CPU interpreter — times are not kernel performance")
    folder = ("--baselines-dir", str(project))
    everything = run_cli("compare", str(out), *folder, "--wide", cwd=project)
    assert "baseline ms" in everything.stdout
