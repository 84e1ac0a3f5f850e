"""The written contract (docs/KERNEL_CONTRACT.md): declared profiles, inputs, check-spec,
module and file paths."""

from __future__ import annotations

import dataclasses
import textwrap

import numpy as np
import pytest

from ci_bench.contract.check import spec_problems
from ci_bench.contract.matrix import expand, profile_notes
from ci_bench.contract.spec import MatrixProfile, SpecError, Tolerance, as_inputs
from ci_bench.errors import ExitCode
from kernels.matmul import SPEC, VERSION
from tests.conftest import FIXTURES, run_cli, write_project

SMOKE_ONLY = dataclasses.replace(SPEC, matrix={"smoke": SPEC.matrix["smoke"]})


def test_only_declared_profiles_are_required_and_a_missing_one_falls_back_down():
    ci_only = dataclasses.replace(SPEC, matrix={"ci": SPEC.matrix["ci"]})
    assert SMOKE_ONLY.profile_for("full") == "smoke"
    assert SMOKE_ONLY.cases("ci") == SMOKE_ONLY.cases("smoke")
    assert ci_only.profile_for("full") == "ci"
    assert ci_only.profile_for("smoke") == "ci"  # nothing smaller: the smallest declared
    assert SPEC.profile_for("ci") == "ci"
    specs = {"matmul": SMOKE_ONLY}
    assert profile_notes(specs, "full") == [
        "kernel matmul declares no 'full' profile: running 'smoke'"
    ]
    assert profile_notes(specs, "smoke") == []
    assert len(expand(specs, "full")) == len(SPEC.cases("smoke"))


def test_make_inputs_may_return_a_bare_array_but_not_a_dict():
    x = np.zeros((2, 3))
    assert as_inputs(x)[0] is x
    assert as_inputs([x, x]) == (x, x)
    with pytest.raises(SpecError, match="make_inputs must return a tuple of arrays"):
        as_inputs({"x": x}, "demo")


def test_check_spec_passes_the_project_kernels_and_names_every_broken_rule():
    assert spec_problems(SPEC) == []
    broken = dataclasses.replace(
        SPEC,
        flops=lambda case: case["missing"],
        bytes_accessed=lambda case: -1.5,
        native="jnp.matmul",
        matrix={"smoke": MatrixProfile(({"B": 1, "M": 8, "K": 8, "N": 8},) * 2, ("float32",))},
        tolerances={"float32": Tolerance(1e-3, 1e-3)},
    )
    problems = spec_problems(broken)
    assert "native is not callable (str)" in problems
    assert any(p.startswith("flops(matmul/B1-M8-K8-N8/float32) raised KeyError") for p in problems)
    assert any("bytes_accessed" in p and "non-negative int" in p for p in problems)
    assert "profile smoke: case id matmul/B1-M8-K8-N8/float32 appears twice" in problems


def test_check_spec_cli_accepts_a_file_path_and_reports_in_one_line_each(tmp_path):
    bad = tmp_path / "bad_kernel.py"
    bad.write_text(
        textwrap.dedent(
            """\
            import dataclasses
            from kernels.matmul import SPEC as M
            SPEC = dataclasses.replace(M, name="bad", flops=lambda case: "many")
            """
        )
    )
    rmsnorm = str(FIXTURES.parents[1] / "examples" / "rmsnorm.py")
    ok = run_cli(
        "check-spec", "kernels.matmul", str(FIXTURES / "lane_block.py"), rmsnorm, cwd=tmp_path
    )
    assert ok.returncode == 0, ok.stderr
    assert f"kernel matmul v{VERSION} ok" in ok.stdout
    assert "kernel lane_block v0.1.0 ok" in ok.stdout
    assert "kernel rmsnorm v0.1.0 ok (smoke, ci; 10 cases; compute unit vector)" in ok.stdout
    done = run_cli("check-spec", "bad_kernel.py", cwd=tmp_path)
    assert done.returncode == ExitCode.USAGE
    assert "returned str, expected an int" in done.stdout


def test_kernel_module_accepts_file_paths_and_states_the_rule_when_missing(tmp_path):
    write_project(tmp_path, [])
    sub = tmp_path / "k"
    sub.mkdir()
    (sub / "tiny.py").write_text((FIXTURES / "lane_block.py").read_text())
    listed = run_cli("list", "--kernel-module", "k/tiny.py", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "lane_block/R16-C200/float32" in listed.stdout
    missing = run_cli("list", "--kernel-module", "k/nope.py", cwd=tmp_path)
    assert missing.returncode == ExitCode.USAGE
    assert "no such file" in missing.stderr
    assert "config file's folder" in missing.stderr
    unknown = run_cli("list", "--kernel-module", "nope_module", cwd=tmp_path)
    assert unknown.returncode == ExitCode.USAGE
    assert "module name" in unknown.stderr
    assert "file path" in unknown.stderr
