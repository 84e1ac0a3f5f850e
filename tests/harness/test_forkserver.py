"""The workflow tests' ``ci-bench`` (a fork of a server that imported it) answers as the real
console script does: exit code, both streams, the caller's working directory, environment
and ``sys.path``, a signal, ``atexit``; a variable read at import gets a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import forkserver

REAL = str(Path(sys.prefix) / "bin" / "ci-bench")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(forkserver.venv(tmp_path_factory.mktemp("stand-in") / "venv") / "bin" / "ci-bench")


def _both(client: str, *args: str, cwd: Path, env: dict[str, str] | None = None):
    full = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONPATH")} | (env or {})
    done = [
        subprocess.run([cli, *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=300)
        for cli in (client, REAL)
    ]
    return [(d.returncode, d.stdout, d.stderr) for d in done]


def test_exit_codes_and_streams_are_the_console_scripts(client, tmp_path):
    forked, real = _both(client, "--version", cwd=tmp_path)
    assert forked == real
    assert forked[0] == 0
    forked, real = _both(client, "no-such-command", cwd=tmp_path)
    assert forked == real
    assert forked[0] == 2


def test_the_callers_directory_environment_and_path_not_the_servers(client, tmp_path):
    """A kernel from the caller's PYTHONPATH and folder; the server's own sys.path (this
    repository's ``kernels``) is not there, as it would not be in a new process."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "onpath.py").write_text("from examples.rmsnorm import SPEC\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[tool.ci-bench]\nkernels = ["onpath"]\n')
    repo = str(Path(__file__).resolve().parents[2])
    forked, real = _both(client, "list", cwd=project, env={"PYTHONPATH": f"{lib}:{repo}"})
    assert forked == real
    assert forked[0] == 0
    assert "rmsnorm" in forked[1]
    (project / "pyproject.toml").write_text('[tool.ci-bench]\nkernels = ["kernels.matmul"]\n')
    forked, real = _both(client, "list", cwd=project)  # no PYTHONPATH: not importable
    assert forked == real
    assert forked[0] != 0


def test_a_segfault_is_the_callers_signal_and_atexit_runs(client, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.ci-bench]\nkernels = ["boom"]\n')
    (tmp_path / "boom.py").write_text(
        "import atexit, ctypes, os, pathlib\n"
        "atexit.register(lambda: pathlib.Path('atexit-ran').write_text('yes'))\n"
        "if os.environ.get('BOOM'):\n    ctypes.string_at(0)\n"
        "raise SystemExit(7)\n"
    )
    env = {"PYTHONPATH": str(tmp_path)}
    forked, real = _both(client, "list", cwd=tmp_path, env=env)
    assert forked[0] == real[0] == 7
    assert (tmp_path / "atexit-ran").read_text() == "yes"
    shell = subprocess.run(
        ["bash", "-c", f'"{client}" list; echo "rc=$?"'],
        cwd=tmp_path,
        env={**os.environ, **env, "BOOM": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "rc=139" in shell.stdout  # SIGSEGV, as bash reports a segfaulted command


def test_a_variable_read_at_import_gets_a_new_process():
    started = {"HOME": "/h", "JAX_ENABLE_X64": "0"}
    assert not forkserver._needs_process({"HOME": "/other", "JAX_ENABLE_X64": "0"}, started)
    assert not forkserver._needs_process({**started, "PYTHONPATH": "/x"}, started)
    assert forkserver._needs_process({**started, "JAX_ENABLE_X64": "1"}, started)
    assert forkserver._needs_process({"HOME": "/h"}, started)
    assert forkserver._needs_process({**started, "XLA_FLAGS": "--x"}, started)
