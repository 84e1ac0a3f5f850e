"""Training kernels through the command line (issue 21): backward cases measured and
checked, jax's flash_attention from one SPEC, two Pallas variants in one table,
check-spec tracing every case."""

from __future__ import annotations

import json
import textwrap

from ci_bench.errors import ExitCode
from ci_bench.schema import RESULTS_READABLE, Results
from ci_bench.store.files import read_model
from tests.conftest import REPO, run_cli, write_project

EXAMPLES = REPO / "examples"
QUICK = ("--repeats", "2", "--warmup", "0")


def load(path) -> Results:
    return read_model(path, Results, what="results", schema_version=RESULTS_READABLE)


def test_a_wrong_backward_is_an_error_through_the_cli_and_the_forward_still_passes(tmp_path):
    write_project(tmp_path, ["wrong_grad_matmul"])
    out = tmp_path / "r.json"
    done = run_cli("run", *QUICK, "-o", str(out), cwd=tmp_path)
    assert done.returncode == ExitCode.FAILED, done.stderr
    forward, backward = load(out).cases
    assert forward.status == "ok"
    assert forward.speedup is not None
    assert backward.id == "wrong_grad_matmul/B1-M128-K128-N128/float32/backward"
    assert backward.status == "error"
    assert backward.error.startswith("incorrect gradient for b: max abs err ")
    assert backward.speedup is None
    assert not backward.gradients["b"].ok
    assert backward.gradients["a"].ok
    assert f"{backward.id}: error: incorrect gradient for b" in done.stdout
    # and a comparison calls it an error, never a speedup
    compared = run_cli("compare", str(out), "--format", "json", cwd=tmp_path)
    verdicts = {c["id"]: c["verdict"] for c in json.loads(compared.stdout)["cases"]}
    assert verdicts[backward.id] == "error"
    assert compared.returncode == ExitCode.FAILED


def test_jax_flash_attention_forward_and_backward_from_one_spec_under_the_tpu_interpreter(
    tmp_path,
):
    config = EXAMPLES / "flash_attention" / "pyproject.toml"
    out = tmp_path / "r.json"
    args = ("--config", str(config), "--case", "*/float32*", *QUICK, "--no-compilation-cache")
    done = run_cli("run", *args, "-o", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    results = load(out)
    assert results.meta.settings.interpret_mode == "tpu"
    forward, backward = results.cases
    assert forward.id == "flash_attention/B1-H2-T256-D64/float32"
    assert backward.id == forward.id + "/backward"
    assert forward.correctness.ok
    assert set(backward.gradients) == {"q", "k", "v"}
    assert all(g.ok for g in backward.gradients.values())
    # the SPEC declares its backward cost (2.5x forward, recomputation included)
    assert backward.metrics.flops_source == "declared"
    assert backward.metrics.flops == 5 * forward.metrics.flops // 2
    # the backward export holds the two backward kernels, and only them
    lowered = run_cli(
        "lower", "--platform", "tpu", *args[:4], "-o", str(tmp_path / "l.json"), cwd=tmp_path
    )
    assert lowered.returncode == 0, lowered.stderr
    cases = {c["id"]: c for c in json.loads((tmp_path / "l.json").read_text())["cases"]}
    assert cases[backward.id]["kind"] == "mosaic"


def test_two_pallas_variants_and_the_native_baseline_in_one_table(tmp_path):
    write_project(tmp_path, [])
    out = tmp_path / "r.json"
    module = str(EXAMPLES / "matmul_tilings.py")
    done = run_cli(
        "run",
        "--kernel-module",
        module,
        "--case",
        "*/float32*",
        *QUICK,
        "-o",
        str(out),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    cases = load(out).cases
    assert [c.mode for c in cases] == ["forward", "backward"]
    for case in cases:
        assert case.implementations.subject == "tile256"
        assert case.implementations.baseline == "native"
        ((name, other),) = case.implementations.others.items()
        assert name == "pallas"
        assert other.timing is not None
        assert other.speedup > 0
    lines = done.stdout.splitlines()
    # the subject's row, then the other tiling's row under it, for each mode
    at = [i for i, line in enumerate(lines) if line.startswith("matmul_tilings/")]
    assert len(at) == 2
    for i, mode in zip(at, ("fwd", "bwd"), strict=True):
        assert lines[i].split()[1] == mode
        other = lines[i + 1].split()
        assert other[:3] == ["↳", "pallas", mode]
        assert other[5].endswith("×")  # its speedup over the same baseline
    assert "Pallas ms is tile256 (the subject), native ms is native (the baseline)" in done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) <= 120
    # The comment's figures table: the other variant's time beside the subject's (issue 30).
    shown = run_cli("compare", str(out), "--format", "markdown", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    (at,) = [i for i, x in enumerate(lines) if x.startswith("| case ") and "TFLOPS" in x]
    names = [h.strip().rstrip("†") for h in lines[at].split("|")[2:5]]  # † CPU interpreter
    assert names == ["Pallas ms", "native ms", "pallas ms"]
    rows = lines[at + 2 : at + 2 + len(cases)]
    assert all(float(row.split("|")[4]) > 0 for row in rows), rows  # the variant's mean, ms


def test_check_spec_traces_every_case_from_declared_shapes_and_fails_one_that_cannot(tmp_path):
    (tmp_path / "shapes_only.py").write_text(
        textwrap.dedent(
            """\
            import dataclasses, sys
            sys.path.insert(0, %r)
            from flash_attention import SPEC as FA

            def make_inputs(case, key):
                raise AssertionError("check-spec must not build arrays")

            SPEC = dataclasses.replace(FA, name="shapes_only", make_inputs=make_inputs)
            """
        )
        % str(EXAMPLES / "flash_attention")
    )
    (tmp_path / "untraceable.py").write_text(
        textwrap.dedent(
            """\
            import dataclasses
            from kernels.matmul import SPEC as M, matmul

            def pallas(a, b):
                if a.shape[-2] % 8:
                    raise ValueError(f"rows {a.shape[-2]} are not a multiple of 8")
                return matmul(a, b)

            SPEC = dataclasses.replace(M, name="untraceable", pallas=pallas)
            """
        )
    )
    ok = run_cli("check-spec", "shapes_only.py", cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "kernel shapes_only v0.1.0 ok" in ok.stdout
    assert "modes forward, backward, forward+backward" in ok.stdout
    bad = run_cli("check-spec", "untraceable.py", cwd=tmp_path)
    assert bad.returncode == ExitCode.USAGE
    assert (
        "untraceable/B1-M127-K513-N255/float32: pallas (forward) cannot trace: "
        "ValueError: rows 127 are not a multiple of 8"
    ) in bad.stdout
    assert "untraceable/B1-M127-K513-N255/float32/backward: pallas (backward) cannot trace" in (
        bad.stdout
    )
