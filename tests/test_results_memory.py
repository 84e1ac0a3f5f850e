"""Results files, reports and baselines are written case by case (issue 31, memory): the
pieces are the whole dump byte for byte, and what merge and promote write is unchanged."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ci_bench.schema import BaselineFile
from ci_bench.store.baselines import entry_from_results
from ci_bench.store.files import dump_chunks, dump_model
from tests.conftest import run_cli
from tests.harness.factories import case, results

IDS = [f"matmul/B{i}-M128-K128-N128/float32" for i in range(1, 6)]


def test_pieces_are_the_whole_dump_byte_for_byte():
    run = results([case(i, 1.0 + k / 10) for k, i in enumerate(IDS)])
    assert "".join(dump_chunks(run)) == dump_model(run)
    empty = run.model_copy(update={"cases": []})
    assert "".join(dump_chunks(empty)) == dump_model(empty)
    entry = entry_from_results(run, "matmul", run.meta.started_at, "v1")
    doc = BaselineFile(kernel="matmul", version="0.1.0", entries=[entry])
    assert "".join(dump_chunks(doc, ("entries", "cases"))) == dump_model(doc)


def test_models_that_set_the_same_fields_share_one_field_set():
    a, b = case(IDS[0]), case(IDS[1])
    assert a.pallas is not None
    assert b.pallas is not None
    assert a.pallas.model_fields_set is b.pallas.model_fields_set
    # a copy with an update gets its own set: the shared one is never changed
    c = a.pallas.model_copy(update={"warmup": 1})
    assert c.model_fields_set is not a.pallas.model_fields_set
    assert a.pallas.model_fields_set == b.pallas.model_fields_set


def cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it (in this process: tests/conftest.py's run_cli)."""
    return run_cli(*args, cwd=cwd)


def test_merge_and_promote_write_what_they_wrote_before(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.ci-bench]\nkernels = ["kernels.matmul"]\n')
    run = results([case(i, 1.0 + k / 10) for k, i in enumerate(IDS)])
    (tmp_path / "r.json").write_text(dump_model(run))
    done = cli(["merge", "r.json", "-o", "m.json"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "m.json").read_text() == dump_model(run)
    done = cli(["promote", "r.json", "--baselines-dir", "b", "--tag", "v1"], tmp_path)
    assert done.returncode == 0, done.stderr
    written = (tmp_path / "b" / "matmul_v0.1.0.json").read_text()
    doc = BaselineFile.model_validate_json(written)
    assert written == dump_model(doc)
    done = cli(["compare", "r.json", "--baselines-dir", "b", "--format", "json"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("{\n")
    assert done.stdout.endswith("}\n")
    assert '"verdict": "pass"' in done.stdout


def test_run_resume_of_a_missing_file_is_one_line_exit_2(tmp_path):
    """A mistyped --resume path used to measure everything again and exit 0 (fuzzer)."""
    (tmp_path / "pyproject.toml").write_text('[tool.ci-bench]\nkernels = ["kernels.matmul"]\n')
    done = cli(["run", "--resume", "nothere.json", "-q"], tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "ci-bench: error: nothere.json: results file to resume not found (--resume)"
    ]
    assert not (tmp_path / "nothere.json").exists()


def test_ci_resume_of_a_missing_file_is_one_line_exit_2(tmp_path):
    """``ci --resume`` takes the same flag as ``run``: a mistyped path started a fresh run."""
    (tmp_path / "pyproject.toml").write_text('[tool.ci-bench]\nkernels = ["kernels.matmul"]\n')
    done = cli(["ci", "--resume", "nothere.json", "--no-comment", "-q"], tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "ci-bench: error: nothere.json: results file to resume not found (--resume)"
    ]
    assert not (tmp_path / "nothere.json").exists()
    assert not (tmp_path / "ci-bench-out").exists()


@pytest.mark.parametrize("role", ["ab", "shard"])
def test_ci_results_naming_a_missing_file_is_one_line_exit_2(tmp_path, role):
    """Found by the 10,000-run fuzz: ``ci --role ab --results missing.json`` exited 0 (the
    ab role reads no results file). A role that does not read --results refuses a missing
    one (the report role reports a lost shards folder instead)."""
    (tmp_path / "pyproject.toml").write_text('[tool.ci-bench]\nkernels = ["kernels.matmul"]\n')
    done = cli(["ci", "--role", role, "--results", "missing.json", "--no-comment"], tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "ci-bench: error: missing.json: results file not found (--results)"
    ]


def test_ci_report_dir_outside_the_comment_and_relay_roles_is_exit_2(tmp_path):
    """``ci --report-dir <missing folder>`` ran the whole pipeline and exited 0 (fuzzer):
    only the comment and relay roles read an artifact folder; any other refuses the flag."""
    (tmp_path / "pyproject.toml").write_text('[tool.ci-bench]\nkernels = ["kernels.matmul"]\n')
    for role in ("all", "shard", "promote"):
        done = cli(["ci", "--role", role, "--report-dir", "nothere"], tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [
            f"ci-bench: error: --report-dir: the {role} role reads no artifact folder "
            "(only comment and relay do)"
        ]


def test_the_fuzzers_generic_recipe_reads_results_only_when_it_names_them():
    """``tune`` reads no results file: a damaged results.json is no input of its (its three
    'silent passes' were the fuzzer's false assumption)."""
    from tests.harness.fuzz_commands import recipe, subcommands

    parsers = subcommands()
    assert recipe("tune", parsers["tune"]).reads == ("config",)
    assert "results.json" not in recipe("tune", parsers["tune"]).argv
