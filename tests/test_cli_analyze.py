"""``ci-bench analyze``, the model in results and ``compare``, and ``lower``'s VMEM check, end
to end as subprocesses (the way CI runs them)."""

from __future__ import annotations

import json
import subprocess

import pytest

from ci_bench.errors import ExitCode
from ci_bench.schema import RESULTS_SCHEMA_VERSION, Results
from ci_bench.store.files import read_model
from tests.conftest import run_cli, write_project

KIB = 1024
CASE = "tiling_matmul"
SMALL_BLOCKS = {"MATMUL_BLOCKS": "64,128,128"}


def test_analyze_json_has_the_contracts_fields_with_hand_computed_figures(tmp_path):
    write_project(tmp_path, ["kernels.matmul"])
    done = run_cli(
        "analyze", "--profile", "smoke", "--kernel", "matmul", "--chip", "v5e", "--chip",
        "v6e", "--format", "json", "-q", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == ExitCode.OK, done.stderr
    doc = json.loads(done.stdout)
    # Every case is timed: matmul's float32 operands make one bfloat16 pass on a TPU (0.2.0),
    # and float32 dots are priced since model revision 5.
    assert (doc["kind"], doc["schema_version"], doc["verdict"]) == ("analysis", 4, "pass")
    assert doc["meta"]["chips"] == ["v5e", "v6e"]
    by_id = {c["id"]: c for c in doc["cases"]}
    for case in doc["cases"]:
        for key in ("hbm_bytes", "ideal_bytes", "vmem_bytes", "grid_steps", "flops", "calls"):
            assert case[key] is not None, key
        for chip in ("v5e", "v6e"):
            assert {"vmem_limit_bytes", "fits", "modelled_us"} <= set(case["chips"][chip])
            assert case["status"] == "ok", case
            assert case["chips"][chip]["modelled_us"] > 0
    # 128³ bf16 in one (128, 128, 128) step: a, b read and the output written once (3 x
    # 32 KiB); one buffer of each block (a one-step grid: every block the same at every
    # step, as Mosaic allocates it, model revision 7) and the f32 accumulator: 3 x 32 + 64.
    small = by_id["matmul/B1-M128-K128-N128/bfloat16"]
    assert small["hbm_bytes"] == small["ideal_bytes"] == 3 * 32 * KIB
    assert small["vmem_bytes"] == 160 * KIB
    assert small["grid_steps"] == 1
    assert small["chips"]["v5e"]["vmem_limit_bytes"] == 16 * 1024 * KIB
    assert small["chips"]["v6e"]["vmem_limit_bytes"] == 32 * 1024 * KIB
    # The table: one row per case, a column per chip.
    table = run_cli("analyze", "--profile", "smoke", "--kernel", "matmul", "-q", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert "v5e µs" in table.stdout
    assert "matmul/B1-M127-K513-N255/float32" in table.stdout


def test_a_partial_case_carries_no_modelled_time_in_the_json(tmp_path):
    """Issue 39: the analysis JSON is the contract other tools read; a partial case (a
    ``while`` of dynamic trip count in the body) has every per-chip time null, in the case
    and in its calls, and no table row shows one."""
    from ci_bench.schema.analysis import Analysis

    write_project(tmp_path, ["partial_while_kernel", "sub_block_kernel"])
    args = ("analyze", "--profile", "smoke", "--chip", "v5e", "--chip", "v6e", "-q")
    done = run_cli(*args, "--format", "json", cwd=tmp_path)
    assert done.returncode == ExitCode.OK, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["schema_version"], doc["verdict"]) == (4, "partial")
    by_kernel = {c["kernel"]: c for c in doc["cases"]}
    partial, whole = by_kernel["partial_while"], by_kernel["sub_block"]
    assert partial["status"] == "partial"
    assert "a while loop with a dynamic trip count in the body" in partial["reason"]
    assert partial["hbm_bytes"] == whole["hbm_bytes"] > 0  # bytes stay: lower bounds
    times = ("modelled_us", "compute_us", "memory_us", "overhead_us", "mfu_ceiling", "bound")
    times += ("vector_us", "eup_us")  # the vector term's parts (issue 39), withheld too
    chips = [partial["chips"], *(call["chips"] for call in partial["calls"])]
    assert len(chips) == 2
    for per_chip in chips:
        assert set(per_chip) == {"v5e", "v6e"}
        for chip in per_chip.values():
            assert {k: chip[k] for k in times} == dict.fromkeys(times)
            assert chip["fits"] is True
    for chip in ("v5e", "v6e"):
        assert whole["chips"][chip]["modelled_us"] > 0
        assert whole["calls"][0]["chips"][chip]["modelled_us"] > 0
        assert whole["chips"][chip]["vector_us"] > 0  # its doubling runs on the VALU
    # Read back (the lowering role reads this file): still null, still partial.
    back = Analysis.model_validate_json(done.stdout)
    assert back.cases[0].status == "partial"
    assert back.cases[0].chips["v5e"].modelled_us is None
    # A version-3 file's partial times are dropped on reading.
    old = {**doc, "schema_version": 3}
    old["cases"] = [
        {**c, "chips": {n: {**v, "modelled_us": 1.5, "bound": "memory", "compute_us": 0.1,
                            "memory_us": 1.5, "overhead_us": 0.2} for n, v in c["chips"].items()}}
        for c in doc["cases"]
    ]  # fmt: skip
    read = Analysis.model_validate(old)
    by_id = {c.kernel: c for c in read.cases}
    assert by_id["partial_while"].chips["v6e"].modelled_us is None
    assert by_id["partial_while"].chips["v6e"].bound is None
    assert by_id["sub_block"].chips["v6e"].modelled_us == 1.5
    table = run_cli(*args, cwd=tmp_path)
    assert table.returncode == ExitCode.OK, table.stderr
    (row,) = [line for line in table.stdout.splitlines() if line.startswith("partial_while/")]
    assert "dynamic trip count" in row
    assert "µs" not in row
    assert not any(ch.isdigit() for ch in row.split("/float32")[1])


def test_a_partial_case_carries_no_modelled_time_in_the_lowering_file(tmp_path):
    """Issue 39: the lowering file (the pull request's artifact) holds each case's model too;
    a partial case's times are null there as in the analysis file (lowering version 6)."""
    write_project(tmp_path, ["partial_while_kernel"])
    out = tmp_path / "lowering.json"
    args = ("lower", "--platform", "tpu", "--chip", "v5e", "-q", "-o", str(out))
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == ExitCode.OK, done.stderr
    doc = json.loads(out.read_text())
    (case,) = doc["cases"]
    assert (doc["schema_version"], case["status"]) == (6, "ok")
    model = case["model"]
    assert model["status"] == "partial"
    assert model["hbm_bytes"] > 0
    for chip in (model["chips"]["v5e"], model["calls"][0]["chips"]["v5e"]):
        assert chip["fits"] is True
        assert chip["modelled_us"] is None
        assert chip["memory_us"] is None
        assert chip["bound"] is None


def test_a_partial_case_carries_no_modelled_time_in_the_results_file(tmp_path):
    """Issue 39: ``run``'s results file (and the baselines promoted from it) holds each
    case's model; a partial case's times are withheld there too (results version 6),
    whichever version wrote them: a partial model as an older writer left it, times and
    all, reads and writes back with every time null; a whole model keeps its times."""
    from pydantic import TypeAdapter

    from ci_bench.schema import CaseResult

    write_project(tmp_path, ["partial_while_kernel", "sub_block_kernel"])
    out = tmp_path / "analysis.json"
    args = ("analyze", "--chip", "v5e", "--format", "json", "-q", "-o", str(out))
    run_cli(*args, cwd=tmp_path)
    analysis_only = ("id", "kernel", "version", "errors", "against")  # the analysis case's own
    by_kernel = {
        c["id"].split("/")[0]: {k: v for k, v in c.items() if k not in analysis_only}
        for c in json.loads(out.read_text())["cases"]
    }
    whole = by_kernel["sub_block"]
    older = {**by_kernel["partial_while"], "chips": whole["chips"]}  # a v5 writer's times
    field = TypeAdapter(CaseResult.model_fields["model"].annotation)
    read = field.validate_python(older)
    assert read.status == "partial"
    assert read.chips["v5e"].modelled_us is None
    assert read.chips["v5e"].bound is None
    written = json.loads(field.dump_json(read))
    assert written["chips"]["v5e"]["modelled_us"] is None
    assert written["hbm_bytes"] == whole["hbm_bytes"] > 0  # bytes stay: lower bounds
    kept = field.validate_python(whole)
    assert kept.chips["v5e"].modelled_us == whole["chips"]["v5e"]["modelled_us"] > 0
    assert RESULTS_SCHEMA_VERSION == 6


def test_unknown_chips_and_empty_selections_are_one_line_usage_errors(tmp_path):
    write_project(tmp_path, ["kernels.matmul"])
    bad = run_cli("analyze", "--chip", "v9", cwd=tmp_path)
    assert bad.returncode == ExitCode.USAGE
    assert bad.stderr.strip() == (
        "ci-bench: error: --chip: unknown chip(s) v9; TPU chips: v4i, v4, v5e, v5p, v6e, 7, "
        "7x, 8i; GPUs: h100, h200, b200"
    )
    empty = run_cli("analyze", "--case", "nothing/*", cwd=tmp_path)
    assert empty.returncode == ExitCode.USAGE
    assert "Traceback" not in empty.stderr
    folder = run_cli("analyze", "-o", str(tmp_path), cwd=tmp_path)
    assert folder.returncode == ExitCode.USAGE
    assert "it is a directory" in folder.stderr


def test_blocks_past_the_scoped_vmem_limit_are_an_error_in_analyze_and_lower(tmp_path):
    write_project(tmp_path, ["vmem_hog_matmul"])
    done = run_cli("analyze", "--format", "json", "-q", cwd=tmp_path)
    assert done.returncode == ExitCode.FAILED, done.stderr
    (case,) = json.loads(done.stdout)["cases"]
    # 24 MiB of blocks and accumulator (the fixture's docstring), and the bfloat16 copy of
    # the dot's left operand Mosaic stages (1024 x 2048 x 2 B = 4 MiB; temporaries.py).
    assert case["vmem_bytes"] == 28 * 1024 * KIB
    assert case["errors"] == [
        f"{chip}: 28.00 MiB of VMEM (blocks, scratch, the body's values) exceed the default "
        "scoped VMEM limit of 16.00 MiB"
        for chip in ("v4i", "v4", "v5e")  # v4i, v4: past their whole 16 MiB; v5e: solid
    ]
    # v5p: the 16 MiB default has no solid source (64 MiB of VMEM): a warning, it fits.
    for chip in ("v5p",):
        assert case["chips"][chip]["fits"]
        assert "a warning, not an error" in case["chips"][chip]["vmem_warning"]
    assert not case["chips"]["v5e"]["fits"]
    assert case["chips"]["v6e"]["fits"]  # 32 MiB there
    assert run_cli("analyze", "--chip", "v6e", "-q", cwd=tmp_path).returncode == ExitCode.OK
    lenient = run_cli("analyze", "--fail-on", "none", "-q", cwd=tmp_path)
    assert lenient.returncode == ExitCode.OK  # shown, not failing
    assert "Does not fit VMEM" in lenient.stdout
    out = tmp_path / "lower.json"
    lowered = run_cli("lower", "--platform", "tpu", "-o", str(out), "-q", cwd=tmp_path)
    assert lowered.returncode == ExitCode.FAILED, lowered.stderr
    (row,) = json.loads(out.read_text())["cases"]
    assert row["status"] == "error"
    assert row["kind"] == "mosaic"  # it lowers: only libtpu on the chip would refuse it
    assert row["error"].startswith(
        "does not fit VMEM: on TPU v4i, TPU v4 and TPU v5e: 28.00 MiB of VMEM (blocks, "
        "scratch, the body's values) exceed the default scoped VMEM limit of 16.00 MiB"
    )  # one reason, said once for the chips it holds on
    assert "0/1 cases lower for tpu as v4i, v4, v5e" in lowered.stdout


@pytest.fixture
def tiled(tmp_path):
    """A project whose matmul's tiling comes from MATMUL_BLOCKS, with a baseline of the
    default tiling promoted from a real run."""
    write_project(tmp_path, [CASE])
    base = tmp_path / "base.json"
    done = run_cli("run", "--repeats", "3", "--warmup", "1", "-q", "-o", str(base), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    promoted = run_cli("promote", str(base), "--baselines-dir", "b", cwd=tmp_path)
    assert promoted.returncode == 0, promoted.stderr
    return tmp_path


def _run_and_compare(folder, name, env=None):
    out = folder / f"{name}.json"
    done = run_cli(
        "run", "--repeats", "3", "--warmup", "1", "-q", "-o", str(out), cwd=folder, env=env
    )
    assert done.returncode == 0, done.stderr
    report = folder / f"{name}-report.json"
    compared = run_cli("compare", str(out), "--baselines-dir", "b", "-o", str(report), cwd=folder)
    results = read_model(out, Results, what="results", schema_version=RESULTS_SCHEMA_VERSION)
    return compared, results, json.loads(report.read_text())


def test_a_pr_that_only_shrinks_blocks_is_structural_and_one_that_changes_nothing_passes(tiled):
    compared, results, report = _run_and_compare(tiled, "head", SMALL_BLOCKS)
    (case,) = results.cases
    # The results file carries the model: (64, 128, 128) at 256³ bf16 is 16 steps; a read
    # twice (256 KiB), b four times (512 KiB), the output once (128 KiB).
    assert case.model is not None
    assert case.model.grid_steps == 16
    assert case.model.hbm_bytes == 896 * KIB
    assert compared.returncode == ExitCode.FAILED, compared.stdout
    (row,) = report["cases"]
    model = row["model"]
    assert model["verdict"] == "structural"
    assert (model["grid_steps"], model["hbm_bytes"], model["vmem_bytes"]) == (
        8,
        256 * KIB,
        -96 * KIB,
    )
    assert report["counts"]["model-structural"] == 1
    # The same code again: the same model bytes exactly, whatever the timings did.
    compared, results, report = _run_and_compare(tiled, "same")
    (row,) = report["cases"]
    assert row["model"]["verdict"] == "pass"
    assert (row["model"]["hbm_bytes"], row["model"]["grid_steps"]) == (0, 0)
    assert results.cases[0].model.hbm_bytes == 640 * KIB
    assert "structural" not in report["counts"]


def git(folder, *args):
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)


MM = """
import dataclasses, functools
from ci_bench.spec import MatrixProfile
from kernels.matmul import SPEC as MATMUL, BlockSizes, matmul_tiled
ONE = MatrixProfile(({{"B": 1, "M": 512, "K": 512, "N": 512}},), ("bfloat16",))
SPEC = dataclasses.replace(
    MATMUL, name="mm", matrix={{"smoke": ONE}}, modes=("forward",),
    pallas=functools.partial(matmul_tiled, block_sizes=BlockSizes({blocks})),
)
"""


def test_analyze_base_judges_a_tiling_change_against_the_base_ref_exactly(tmp_path):
    write_project(tmp_path, ["mm"])
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "config", "user.email", "t@example.com")
    git(tmp_path, "config", "user.name", "t")
    (tmp_path / "mm.py").write_text(MM.format(blocks="128, 128, 128"))
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "128 blocks")
    (tmp_path / "mm.py").write_text(MM.format(blocks="64, 128, 128"))
    git(tmp_path, "commit", "-q", "-am", "smaller blocks")
    done = run_cli("analyze", "--base", "HEAD~1", "--format", "json", "-q", cwd=tmp_path)
    assert done.returncode == ExitCode.FAILED, done.stderr
    doc = json.loads(done.stdout)
    assert doc["verdict"] == "structural"
    assert doc["meta"]["base_ref"].startswith("HEAD~1 (")
    (case,) = doc["cases"]
    assert case["against"]["verdict"] == "structural"
    assert case["against"]["steps_ratio"] == 2.0
    assert case["against"]["hbm_bytes"] == 2 * 1024 * KIB  # 6.5 MiB against 4.5 MiB
    same = run_cli("analyze", "--base", "HEAD", "--format", "json", "-q", cwd=tmp_path)
    assert same.returncode == ExitCode.OK, same.stderr
    (case,) = json.loads(same.stdout)["cases"]
    assert case["against"]["verdict"] == "pass"
    assert case["against"]["hbm_bytes"] == 0
    lenient = run_cli("analyze", "--base", "HEAD~1", "--fail-on", "none", "-q", cwd=tmp_path)
    assert lenient.returncode == ExitCode.OK
    assert "structural: modelled +" in lenient.stdout
    worktrees = subprocess.run(
        ["git", "-C", str(tmp_path), "worktree", "list"], capture_output=True, text=True, check=True
    ).stdout
    assert len(worktrees.strip().splitlines()) == 1


PW = """
import dataclasses, functools
from sub_block_kernel import SPEC as SUB_BLOCK, double
SPEC = dataclasses.replace(
    SUB_BLOCK, name="pw", tunables=None,
    pallas=functools.partial(double, block_rows={rows}, dynamic=True),
)
"""


def test_analyze_base_compares_a_partial_case_by_its_structure_alone(tmp_path):
    """A partial model has no time, but its grid steps, HBM bytes and VMEM are known (lower
    bounds): against the base they are compared and said to be structural only, never
    judged (``pass``, exit code untouched); unchanged, it says so; a whole case beside it
    is judged by its time as before."""
    write_project(tmp_path, ["pw", "mm"])
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "config", "user.email", "t@example.com")
    git(tmp_path, "config", "user.name", "t")
    (tmp_path / "pw.py").write_text(PW.format(rows=128))
    (tmp_path / "mm.py").write_text(MM.format(blocks="128, 128, 128"))
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "128-row blocks")
    (tmp_path / "pw.py").write_text(PW.format(rows=256))  # half the steps, twice the VMEM
    git(tmp_path, "commit", "-q", "-am", "256-row blocks")
    args = ("analyze", "--chip", "v5e", "-q")
    done = run_cli(*args, "--base", "HEAD~1", "--format", "json", cwd=tmp_path)
    assert done.returncode == ExitCode.OK, done.stderr
    doc = json.loads(done.stdout)
    assert doc["verdict"] == "partial"
    by_kernel = {c["kernel"]: c for c in doc["cases"]}
    pw = by_kernel["pw"]
    assert pw["status"] == "partial"
    against = pw["against"]
    assert against["verdict"] == "pass"  # never judged
    assert (against["time_change"], against["chip"], against["chips"]) == (None, None, {})
    # R = 1024 float32 rows of 128: 8 steps of 128 rows against 4 of 256; each block 64 KiB
    # at 128 rows, two buffers of the input and of the output; every byte read once.
    assert (against["grid_steps"], against["steps_ratio"]) == (-4, 0.5)
    assert (against["vmem_bytes"], against["hbm_bytes"], against["hbm_ratio"]) == (
        256 * KIB,
        0,
        1.0,
    )
    assert against["reason"] == (
        "structural only (partial model on both sides: a while loop with a dynamic trip "
        "count in the body; no time judged, its figures are lower bounds): steps x0.50, "
        "VMEM +256 KiB"
    )
    whole = by_kernel["mm"]["against"]  # a whole model: judged by its time, as before
    assert whole["verdict"] == "pass"
    assert whole["chips"]["v5e"]["change"] == 0.0
    assert whole["reason"] == "modelled +0.0% on v5e, within ±5%"
    table = run_cli(*args, "--base", "HEAD~1", cwd=tmp_path)
    assert table.returncode == ExitCode.OK, table.stderr
    (row,) = [line for line in table.stdout.splitlines() if line.startswith("pw/")]
    assert "partial model, no modelled time" in row
    assert row.rstrip().endswith("structural only: steps x0.50, VMEM +256 KiB")
    assert "µs" not in row
    assert "%" not in row  # no time change
    (row,) = [line for line in table.stdout.splitlines() if line.startswith("mm/")]
    assert row.rstrip().endswith("pass: modelled +0.0% on v5e, within ±5%")
    same = run_cli(*args, "--base", "HEAD", "--format", "json", cwd=tmp_path)
    assert same.returncode == ExitCode.OK, same.stderr
    pw = {c["kernel"]: c for c in json.loads(same.stdout)["cases"]}["pw"]
    assert pw["against"]["verdict"] == "pass"
    assert pw["against"]["reason"].endswith("lower bounds): no structural change")
    assert (pw["against"]["grid_steps"], pw["against"]["vmem_bytes"]) == (0, 0)


def test_a_huge_shape_is_refused_in_one_line_never_allocated(tmp_path):
    # 262144³: 128 GiB per operand and 67 million grid steps in matmul's default tiles. The
    # trace is abstract; the per-step index maps are refused past the model's budget
    # instead of taking gigabytes.
    write_project(tmp_path, ["kernels.matmul"])
    done = run_cli(
        "analyze",
        "--kernel",
        "matmul",
        "--shape",
        "262144,262144,262144",
        "--chip",
        "v5e",
        "--format",
        "json",
        cwd=tmp_path,
        timeout=300,
    )
    assert "Traceback" not in done.stderr
    (case,) = json.loads(done.stdout)["cases"]
    assert case["status"] == "not_modelled"
    assert "past the model's budget of 4,194,304 steps per call" in case["reason"]
    assert "\n" not in case["reason"]


def test_the_xla_operations_around_a_kernel_are_in_its_modelled_time(tmp_path):
    """Issue 39 (model revision 3): a case times its whole function, so the analysis JSON's
    modelled time is the kernel's plus what the XLA operations around it move (4 x the
    array: x read, x + x written, the result read, the quotient written), said apart as
    ``outside_bytes`` and ``outside_us``; the table's µs include it and its note says so."""
    from ci_bench.measure.model.chips import chip

    write_project(tmp_path, ["around_kernel", "sub_block_kernel"])
    args = ("analyze", "--profile", "smoke", "--chip", "v5e", "-q")
    done = run_cli(*args, "--format", "json", cwd=tmp_path)
    assert done.returncode == ExitCode.OK, done.stderr
    by_kernel = {c["kernel"]: c for c in json.loads(done.stdout)["cases"]}
    around, alone = by_kernel["around"], by_kernel["sub_block"]
    array = 1024 * 128 * 4  # the smoke case: R = 1024 rows of 128 float32
    assert (around["outside_bytes"], alone["outside_bytes"]) == (4 * array, 0)
    assert around["hbm_bytes"] == alone["hbm_bytes"]  # the kernels' own traffic
    outside_us = 4 * array / chip("v5e").model_hbm_bytes_per_s * 1e6
    v5e, bare = around["chips"]["v5e"], alone["chips"]["v5e"]
    assert v5e["outside_us"] == pytest.approx(outside_us)
    assert v5e["modelled_us"] == pytest.approx(bare["modelled_us"] + outside_us)
    table = run_cli(*args, cwd=tmp_path)
    assert table.returncode == ExitCode.OK, table.stderr
    assert "the XLA operations around the kernels" in table.stdout
