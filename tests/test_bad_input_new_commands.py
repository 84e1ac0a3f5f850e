"""Issue 18 on the commands main added since (``init``, ``analyze``): each a reproduction.

Found by the fuzzer once it read them from the parser: ``init`` crashed on a
``pyproject.toml`` that is not UTF-8, wrote any ``--kernels`` text into the TOML, and
replaced some files before refusing a link in the way; ``analyze -o`` replaced an existing
file without ``--force`` and took any integer as ``--seed``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from ci_bench.errors import ExitCode
from tests.conftest import run_cli, write_project
from tests.harness.inproc import assert_one_line_error, call


def test_init_on_a_pyproject_that_is_not_utf8_is_one_line(tmp_path):
    (tmp_path / "pyproject.toml").write_bytes(b'[tool.ci-bench]\nkernels = ["\xff"]\n')
    outcome = call("init", "--kernels", "k", cwd=tmp_path)
    assert_one_line_error(outcome, "pyproject.toml", "not UTF-8")


@pytest.mark.parametrize("name", ['a"]\nevil = ["x', "a b", "../k", "1k", ""])
def test_init_writes_only_module_names_into_the_config(tmp_path, name):
    outcome = call("init", "--kernels", name, "--force", cwd=tmp_path)
    assert_one_line_error(outcome, "--kernels", "not a Python module name")
    assert not (tmp_path / "pyproject.toml").exists()


def test_init_with_dotted_modules_writes_a_config_toml_reads_back(tmp_path):
    outcome = call("init", "--kernels", "tpu_ops.flash", "k2", cwd=tmp_path)
    assert outcome.code == 0, outcome.err
    config = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    assert config["tool"]["ci-bench"]["kernels"] == ["tpu_ops.flash", "k2"]


def test_init_refuses_a_link_in_the_way_before_writing_anything(tmp_path):
    target = tmp_path / "elsewhere.yml"
    target.write_text("keep me\n")
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "lower.yml").symlink_to(target)
    outcome = call("init", "--kernels", "k", "--force", cwd=tmp_path)
    assert_one_line_error(outcome, "lower.yml", "symbolic link", "nothing was written")
    assert target.read_text() == "keep me\n"
    assert not (tmp_path / "pyproject.toml").exists()
    assert sorted(p.name for p in workflows.iterdir()) == ["lower.yml"]


def test_analyze_output_is_never_replaced_without_force(tmp_path):
    write_project(tmp_path, ["kernels.matmul"])
    out = tmp_path / "analysis.json"
    out.write_text("keep me\n")
    refused = run_cli("analyze", "--case", "matmul/*", "-q", "-o", str(out), cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert "already exists" in refused.stderr
    assert "--force" in refused.stderr
    assert out.read_text() == "keep me\n"
    forced = run_cli("analyze", "-q", "-o", str(out), "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert '"kind": "analysis"' in out.read_text()


@pytest.mark.parametrize("seed", ["-1", str(2**64), "x"])
def test_analyze_seed_is_bounded(tmp_path, seed: str):
    outcome = call("analyze", "--seed", seed, cwd=tmp_path)
    assert_one_line_error(outcome, "--seed")


def test_analyze_output_under_a_file_is_refused_on_parsing(tmp_path: Path):
    (tmp_path / "f").write_text("x")
    outcome = call("analyze", "-o", "f/a.json", cwd=tmp_path)
    assert_one_line_error(outcome, "f/a.json")


@pytest.mark.parametrize("command", ["analyze", "ab"])
def test_an_empty_base_ref_is_refused_by_analyze_as_by_ab(tmp_path, command):
    """Issue 54 D6: ``analyze --base ""`` ran without a base and exited 0."""
    write_project(tmp_path, ["kernels.matmul"])
    done = run_cli(command, "--base", "", cwd=tmp_path)
    assert done.returncode == ExitCode.USAGE
    assert "--base: an empty ref names no commit" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
