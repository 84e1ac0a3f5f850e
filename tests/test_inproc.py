"""The in-process runner behind ``run_cli``: what a fresh process gives a call, it gives."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from ci_bench.errors import ExitCode
from tests.conftest import run_cli, write_project
from tests.harness import inproc

KERNEL = """
import jax.numpy as jnp

from ci_bench.spec import KernelSpec, MatrixProfile, Tolerance, grid

def fn(x):
    return x * {factor}

SPEC = KernelSpec(
    name="{name}",
    version="1.0.0",
    pallas=fn,
    native=fn,
    reference=fn,
    make_inputs=lambda case, key: (jnp.ones((case["N"],), case.dtype),),
    flops=lambda case: case["N"],
    bytes_accessed=lambda case: 8 * case["N"],
    tolerances={{"float32": Tolerance(1e-6, 1e-6)}},
    matrix={{"smoke": MatrixProfile(grid(N=(8,)), ("float32",))}},
    shape_keys=("N",),
)
"""


def _project(folder: Path, name: str, factor: int) -> Path:
    folder.mkdir()
    (folder / "twin.py").write_text(textwrap.dedent(KERNEL.format(name=name, factor=factor)))
    write_project(folder, ["twin"])
    return folder


def test_a_module_of_the_same_name_in_another_project_is_imported_anew(tmp_path):
    """Two projects each with their own ``twin`` module: a process would import each;
    a cached ``sys.modules['twin']`` would list the first project's kernel twice."""
    first = run_cli("list", cwd=_project(tmp_path / "a", "alpha", 2))
    second = run_cli("list", cwd=_project(tmp_path / "b", "beta", 3))
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert "alpha" in first.stdout
    assert "beta" not in first.stdout
    assert "beta" in second.stdout
    assert "alpha" not in second.stdout
    assert "twin" not in sys.modules


def test_the_call_leaves_cwd_environment_and_sys_path_as_they_were(tmp_path):
    before = (Path.cwd(), dict(os.environ), list(sys.path), dict(sys.modules).keys())
    done = run_cli("list", cwd=_project(tmp_path / "p", "alpha", 2), env={"CI_BENCH_X": "1"})
    assert done.returncode == 0, done.stderr
    after = (Path.cwd(), dict(os.environ), list(sys.path))
    assert after == before[:3]
    assert "CI_BENCH_X" not in os.environ


def test_the_call_sees_exactly_the_environment_it_is_given(tmp_path):
    seen: dict[str, str] = {}

    def main(argv):  # stands in for the CLI: what would its process's environment be?
        seen.update(os.environ)
        sys.stdout.write("out\r\n")
        sys.stderr.write("err\n")
        return 3

    import ci_bench.commands.cli as cli

    real = cli.main
    cli.main = main
    try:
        done = inproc.completed(["x"], tmp_path, {"ONLY": "this", "PYTHONPATH": "/nowhere"})
    finally:
        cli.main = real
    assert seen == {"ONLY": "this", "PYTHONPATH": "/nowhere"}
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


@pytest.mark.parametrize(
    "args",
    [
        ("--version",),
        ("compare", "missing.json"),
        ("list", "--profile", "ci"),
        ("check-spec", "--kernel", "matmul"),
        ("run", "--no-such-flag"),
    ],
)
def test_in_process_and_a_real_process_agree(project, args):
    """The runner's own check: exit code and both streams as the installed CLI's."""
    here = run_cli(*args, cwd=project)
    there = run_cli(*args, cwd=project, process=True)
    assert here.returncode == there.returncode, (here.stderr, there.stderr)
    assert here.stdout == there.stdout
    assert here.stderr == there.stderr


def test_argparse_exits_are_exit_codes(project):
    assert run_cli("--help", cwd=project).returncode == 0
    assert run_cli("no-such-command", cwd=project).returncode == ExitCode.USAGE


def test_a_variable_read_once_per_process_gets_a_process(project, monkeypatch):
    calls = []
    monkeypatch.setattr(inproc, "completed", lambda *a: calls.append(a))
    done = run_cli("list", cwd=project, env={"JAX_PLATFORMS": "cpu"})
    assert calls == []  # a real process ran it
    assert done.returncode == 0, done.stderr
    assert "matmul/" in done.stdout


def test_a_start_up_hook_on_the_path_gets_a_process(tmp_path):
    """A sitecustomize (how tests emulate an installed package) runs only when Python starts."""
    hook = tmp_path / "hook"
    hook.mkdir()
    assert not inproc.needs_process({"PYTHONPATH": str(hook)})
    (hook / "sitecustomize.py").write_text("")
    assert inproc.needs_process({"PYTHONPATH": f"/elsewhere{os.pathsep}{hook}"})
    assert inproc.needs_process({"XLA_FLAGS": "--xla_dump_to=/tmp/x"})
    assert not inproc.needs_process({"GITHUB_TOKEN": "t"})
