"""Shared fixtures: a project folder with its own [tool.ci-bench] config and kernel modules."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"


def write_project(folder: Path, kernels: list[str], extra: str = "") -> Path:
    """A pyproject.toml declaring ``kernels``; modules resolve from ``folder`` and the repo."""
    listed = ", ".join(f'"{k}"' for k in kernels)
    (folder / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""\
            [tool.ci-bench]
            kernels = [{listed}]
            compilation-cache-dir = "{(REPO / ".cache" / "jax").as_posix()}"
            """
        )
        + extra
    )
    return folder / "pyproject.toml"


def run_cli(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    timeout: int = 600,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run ``ci-bench`` as a user would: its exit code and both streams.

    In this process (``tests.harness.inproc.completed``: the state a fresh process would
    have, put back after) unless ``process`` asks for a real one: the exit code of the
    interpreter, signals, output written below Python; a variable read once per process or
    a start-up hook on PYTHONPATH picks one by itself (``inproc.needs_process``).
    ``CI_BENCH_TEST_PROCESS=1`` runs every call as a process (the in-process runner's own
    check). ``timeout`` bounds a process only: a hang in this process is pytest's to report."""
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(FIXTURES)])}
    full_env.update(env or {})
    from tests.harness import inproc

    if not (
        process or os.environ.get("CI_BENCH_TEST_PROCESS") == "1" or inproc.needs_process(env or {})
    ):
        return inproc.completed(args, cwd, full_env)
    return subprocess.run(
        [sys.executable, "-m", "ci_bench.commands.cli", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# What makes a test slow (minutes, not seconds): the workflows run end to end in a real git
# repository (the ``template`` repositories the worlds are cloned from), ci-bench's wheel
# built and installed, or a virtual environment created and pip run for real. The README's
# command runs them too; ``-m "not slow"`` leaves them out of a quick loop.
SLOW_FIXTURES = frozenset({"template", "template_repo", "wheel"})
SLOW_MODULES = frozenset(
    {"test_ci_venv.py", "test_newcomer.py", "test_preview.py", "test_isolation_pipeline.py"}
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & SLOW_FIXTURES or item.path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder configured with the repo's matmul kernel."""
    write_project(tmp_path, ["kernels.matmul"])
    return tmp_path


@pytest.fixture(autouse=True)
def _each_kernel_interprets_as_it_says():
    """An in-process ``--cpu-interpret tpu`` run (the fuzzer's) sets jax's TPU interpret
    mode for the whole process; tests after it in the same worker must not inherit it."""
    yield
    from ci_bench.measure.interpret import reset_interpret_mode

    reset_interpret_mode()
