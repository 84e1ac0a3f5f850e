"""CPU interpret mode per kernel: a TPU-only kernel under jax's TPU interpreter beside a
kernel that interprets itself, in one run; ``init`` names the TPU-only ones."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from ci_bench.contract.spec import SpecError
from ci_bench.measure.interpret import kernel_modes
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
TPU_CASE = "tpu_matmul/M256-K256-N128/float32"
OWN_CASE = "rmsnorm/R64-D256/float32"


def _kernels(**modes: str | None) -> dict[str, SimpleNamespace]:
    return {name: SimpleNamespace(cpu_interpret=mode) for name, mode in modes.items()}


def test_the_config_list_then_the_spec_then_the_default_and_the_flag_overrides_all():
    kernels = _kernels(a=None, b="tpu", c=None, d="kernel")
    assert kernel_modes(kernels, "kernel", False, ["c"]) == (("b", "tpu"), ("c", "tpu"))
    assert kernel_modes(kernels, "tpu", False, []) == (("d", "kernel"),)
    assert kernel_modes(kernels, "kernel", True, ["c"]) == ()  # --cpu-interpret: one switch


def test_a_spec_names_only_a_known_mode():
    from examples.rmsnorm import SPEC

    with pytest.raises(SpecError, match="cpu_interpret"):
        SPEC.__class__(**{**SPEC.__dict__, "cpu_interpret": "gpu"})


def _project(tmp: Path, extra: str = "") -> Path:
    shutil.copy(ROOT / "examples" / "tpu_matmul" / "tpu_matmul.py", tmp / "tpu_matmul.py")
    shutil.copy(ROOT / "examples" / "rmsnorm.py", tmp / "rmsnorm.py")
    (tmp / "pyproject.toml").write_text(
        '[tool.ci-bench]\nkernels = ["tpu_matmul", "rmsnorm"]\nrepeats = 3\nwarmup = 1\n'
        f'compilation-cache-dir = ".cache/jax"\n{extra}'
    )
    return tmp


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One ``run`` of both kernels (in this process, jax's interpret mode put back after)."""
    return run_cli(
        "run", "--case", TPU_CASE, "--case", OWN_CASE, "--format", "json", *args, cwd=folder
    )


def test_a_tpu_only_kernel_and_a_self_interpreting_one_in_one_run(tmp_path):
    folder = _project(tmp_path, 'cpu-interpret-tpu = ["tpu_matmul"]\n')
    done = _run(folder)
    assert done.returncode == 0, done.stderr[-2000:]
    written = json.loads(done.stdout)
    cases = {c["id"]: c for c in written["cases"]}
    assert cases[TPU_CASE]["status"] == "ok"
    assert cases[OWN_CASE]["status"] == "ok"
    # The file says which kernel ran under which interpreter: a later compare's banner
    # names them (tests/test_first_hour_words.py), not the run-wide mode alone.
    settings = written["meta"]["settings"]
    assert settings["interpret_mode"] == "kernel"
    assert settings["kernel_interpret"] == {"tpu_matmul": "tpu"}


def test_without_it_the_tpu_only_kernel_errors_and_says_what_to_set(tmp_path):
    done = _run(_project(tmp_path))
    assert done.returncode == 1
    cases = {c["id"]: c for c in json.loads(done.stdout)["cases"]}
    assert cases[OWN_CASE]["status"] == "ok"
    assert "TPU interpreter" in cases[TPU_CASE]["error"]


def test_init_names_the_tpu_only_kernel_in_the_config(tmp_path):
    shutil.copy(ROOT / "examples" / "tpu_matmul" / "tpu_matmul.py", tmp_path / "tpu_matmul.py")
    shutil.copy(ROOT / "examples" / "rmsnorm.py", tmp_path / "rmsnorm.py")
    done = run_cli("init", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    config = (tmp_path / "pyproject.toml").read_text()
    assert 'cpu-interpret-tpu = ["tpu_matmul"]' in config
    assert "TPU-only on a CPU (jax's TPU interpreter): tpu_matmul." in done.stdout
