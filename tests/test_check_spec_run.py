"""``check-spec --run``: the pull request's profile run once for correctness before the pull
request, each failing case named, no timing printed."""

from __future__ import annotations

from ci_bench.errors import ExitCode
from tests.conftest import run_cli, write_project


def test_check_spec_run_names_the_case_the_ci_profile_gets_wrong(tmp_path):
    write_project(tmp_path, ["wrong_grad_matmul"])
    done = run_cli("check-spec", "--run", cwd=tmp_path)
    assert done.returncode == ExitCode.FAILED, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("wrong_grad_matmul: kernel wrong_grad_matmul v")  # static: ok
    backward = "wrong_grad_matmul/B1-M128-K128-N128/float32/backward"
    assert any(line.startswith(f"{backward}: error: incorrect gradient for b") for line in lines)
    assert lines[-1] == (
        "1/2 cases of profile ci correct (each run once; correctness only, no timing)"
    )
    assert "Pallas ms" not in done.stdout
