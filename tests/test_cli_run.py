"""``ci-bench run`` end to end, as a subprocess, the way a user or CI calls it."""

from __future__ import annotations

import json

import pytest

from ci_bench.errors import ExitCode
from ci_bench.schema import RESULTS_READABLE, Results
from ci_bench.store.files import read_model
from kernels.matmul import VERSION
from tests.conftest import run_cli, write_project


def load(path) -> Results:
    return read_model(path, Results, what="results", schema_version=RESULTS_READABLE)


def test_smoke_profile_runs_validates_and_marks_unaligned_and_batched_correct(tmp_path, project):
    out = tmp_path / "r.json"
    done = run_cli(
        "run", "--kernel", "matmul", "--profile", "smoke", "--output", str(out), cwd=project
    )
    assert done.returncode == 0, done.stderr
    results = load(out)
    assert results.meta.complete
    assert results.meta.profile == "smoke"
    assert results.meta.settings.interpret
    assert results.meta.kernels == {"matmul": VERSION}
    cases = {c.id: c for c in results.cases}
    assert "matmul/B1-M127-K513-N255/float32" in cases
    assert any(c.params["B"] > 1 for c in results.cases)
    # forward and backward (the VJP alone) for every point and dtype (issue 21)
    assert {c.mode for c in results.cases} == {"forward", "backward"}
    assert "matmul/B1-M127-K513-N255/float32/backward" in cases
    for case in results.cases:
        assert case.status == "ok", case.error
        if case.mode == "forward":
            assert case.correctness.ok
        else:  # every input's gradient checked against jax.vjp of the reference
            assert set(case.gradients) == {"a", "b"}
            assert all(g.ok for g in case.gradients.values())
        assert case.pallas.repeats == 20
        assert case.pallas.warmup == 5
        for impl in ("pallas", "native"):
            stats = case.analysis[impl]
            assert stats.memory.peak_bytes > 0
            assert stats.memory.argument_bytes > 0
            assert stats.cost.flops > 0
        # XLA counts jnp.matmul exactly: the matmul FLOPs model agrees with it
        assert case.cost_check.status == "ok", case.cost_check
        assert case.cost_check.ratio == pytest.approx(1.0, rel=0.02)
        # the interpreted Pallas call is a loop, so XLA's count for it is not trusted
        assert case.analysis["pallas"].cost.has_loops
        p = case.params
        calls = 1 if case.mode == "forward" else 2  # backward: dA and dB, a matmul each
        assert case.tflops == pytest.approx(
            calls * 2 * p["B"] * p["M"] * p["K"] * p["N"] / (case.pallas.mean_ms / 1e3) / 1e12
        )
    # the table goes to stdout, progress to stderr
    assert "matmul/B1-M127-K513-N255/float32" in done.stdout
    assert "speedup" in done.stdout
    assert "[1/12]" in done.stderr


def test_adhoc_case_uses_the_specification_interface(tmp_path, project):
    out = tmp_path / "out.json"
    done = run_cli(
        "run",
        "--kernel",
        "matmul",
        "--shape",
        "256,128,128",
        "--dtype",
        "bfloat16",
        "--repeats",
        "3",
        "--output",
        str(out),
        "--format",
        "json",
        "-q",
        cwd=project,
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    case = printed["cases"][0]
    assert case["id"] == "matmul/B1-M256-K128-N128/bfloat16"
    assert case["shape"] == [1, 256, 128, 128]
    assert set(case["pallas"]) >= {"mean_ms", "min_ms", "max_ms", "std_ms"}
    assert case["speedup"] == pytest.approx(case["native"]["mean_ms"] / case["pallas"]["mean_ms"])
    assert load(out).cases[0].id == case["id"]


def test_wrong_kernel_via_config_errors_but_other_cases_complete(tmp_path):
    write_project(tmp_path, ["kernels.matmul", "wrong_matmul"])
    out = tmp_path / "r.json"
    done = run_cli(
        "run", "--kernel", "wrong_matmul", "--repeats", "2", "-o", str(out), cwd=tmp_path
    )
    assert done.returncode == ExitCode.FAILED
    cases = {c.id: c for c in load(out).cases}
    assert len(cases) == 6
    unaligned = cases["wrong_matmul/B1-M127-K513-N255/float32"]
    assert unaligned.status == "error"
    assert unaligned.error.startswith("incorrect:")
    assert unaligned.correctness.max_abs_err == pytest.approx(1.0, abs=0.02)
    batched = cases["wrong_matmul/B4-M128-K256-N128/float32"]
    assert batched.status == "error"
    assert "RuntimeError: batched inputs are not supported" in batched.error
    aligned = cases["wrong_matmul/B1-M128-K128-N128/float32"]
    assert aligned.status == "ok"
    assert aligned.speedup is not None
    assert "error: incorrect" in done.stdout


def test_every_case_erroring_means_nothing_measured(tmp_path):
    write_project(tmp_path, ["wrong_matmul"])
    done = run_cli("run", "--case", "*/B4-*", "--repeats", "1", cwd=tmp_path)
    assert done.returncode == ExitCode.NOTHING_MEASURED


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kernel", "nope"], "unknown kernel nope"),
        (["--kernel-module", "no_such_module_xyz"], "cannot import"),
        (["--kernel-module", "no_spec"], "needs a SPEC"),
        (["--case", "matmul/B99-*"], "matches no case"),
        (["--shard", "5/4"], "--shard 5/4"),
        (["--kernel", "matmul", "--shape", "1,x,3"], "comma-separated integers"),
        (["--kernel", "matmul", "--shape", "1,2"], "--shape wants M,K,N"),
        (["--repeats", "0"], "--repeats: must be between 1 and"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(project, args, message):
    done = run_cli("run", *args, cwd=project)
    assert done.returncode == ExitCode.USAGE
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_broken_config_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.ci-bench]\nrepeats = "many"\n')
    done = run_cli("list", cwd=tmp_path)
    assert done.returncode == ExitCode.USAGE
    assert "[tool.ci-bench] repeats" in done.stderr
    assert "Traceback" not in done.stderr


def test_list_prints_kernels_and_case_ids(project):
    every = run_cli("list", "--profile", "ci", cwd=project).stdout.splitlines()
    ids = [line for line in every if not line.startswith("#")]
    assert len(ids) > 4
    assert every[0].startswith(f"# matmul v{VERSION}")


def test_schema_command_prints_the_json_schema(project):
    done = run_cli("schema", cwd=project)
    schema = json.loads(done.stdout)
    assert schema["properties"]["schema_version"]["enum"] == [1, 2, 3, 4, 5, 6]
    assert schema["properties"]["schema_version"]["default"] == 6
    assert schema["$defs"]["CaseResult"]["properties"]["mode"]["default"] == "forward"
    assert schema["$defs"]["RunSettings"]["properties"]["timer"]["default"] == "wallclock"
    assert "CaseResult" in schema["$defs"]


def test_third_party_kernel_runs_through_the_kernel_module_flag(tmp_path):
    from tests.conftest import REPO

    write_project(tmp_path, [])
    done = run_cli(
        "run",
        "--kernel-module",
        "examples.jax_softmax",
        "--repeats",
        "2",
        "--format",
        "json",
        "-q",
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    cases = json.loads(done.stdout)["cases"]
    assert [c["id"] for c in cases] == [
        "jax_softmax/B1-R64-C256/float32",
        "jax_softmax/B1-R64-C256/bfloat16",
    ]
    assert all(c["status"] == "ok" for c in cases)


def test_a_kernel_named_twice_runs_once(project):
    done = run_cli(
        "run",
        "--kernel",
        "matmul,matmul",
        "--case",
        "matmul/B1-M128-K128-N128/float32",
        "--repeats",
        "1",
        "--warmup",
        "0",
        "--format",
        "json",
        "-q",
        cwd=project,
    )
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["cases"]) == 1
