"""The rooms' import rules are code: ``lint-imports`` ([tool.importlinter] in pyproject.toml,
run by .ci/run) passes on this tree and fails on a planted break of each kind of rule."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).parent / "lint-imports"


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports on the ``ci_bench`` package under ``root`` (first on the path)."""
    return subprocess.run(
        [str(LINT), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_tree_keeps_every_contract() -> None:
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


# One break of each kind: the five the rules once had, the pure request's edges, and the
# pipeline's one-way modules.
PLANTS = [
    # measure runs kernels; it never judges or renders (the ground floor serves both)
    ("measure/harness.py", "from ci_bench.judge import stats", "Rooms: data flows one way"),
    ("measure/progress.py", "from ci_bench.report import render", "Rooms: data flows one way"),
    # the roofline chart takes peaks as values
    ("report/plot.py", "from ci_bench.measure import roofline", "report draws from values"),
    # the config owns its limits; nothing below commands sees argparse
    ("pipeline/config.py", "from ci_bench.commands import validate", "Rooms: data flows one way"),
    # the store keeps files; Shard is a schema value
    ("store/merge.py", "from ci_bench.contract import matrix", "store keeps files"),
    # the pure rooms: no jax, no argparse, no GitHub client, no file store
    ("schema/shard.py", "import jax", "Only the rooms that run kernels load jax"),
    ("pipeline/request.py", "import argparse", "argparse only in commands"),
    ("pipeline/request.py", "from ci_bench.pipeline import config", "Pure rooms"),
    ("judge/ladder.py", "import github", "Pure rooms"),
    # the runner's steps reach their context, never the runner (no hidden cycle)
    ("pipeline/lowering.py", "from ci_bench.pipeline import run", "The runner one way"),
    ("pipeline/context.py", "from ci_bench.pipeline import steps", "The runner one way"),
]


@pytest.mark.parametrize(("module", "line", "contract"), PLANTS)
def test_a_planted_break_fails_naming_the_rule_and_the_import(
    tmp_path: Path, module: str, line: str, contract: str
) -> None:
    shutil.copytree(
        ROOT / "ci_bench", tmp_path / "ci_bench", ignore=shutil.ignore_patterns("*.pyc")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    planted = tmp_path / "ci_bench" / module
    planted.write_text(planted.read_text(encoding="utf-8") + f"\n{line}  # planted\n")
    done = lint(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    importer = "ci_bench." + module.removesuffix(".py").replace("/", ".")
    broken = done.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken
    assert importer in broken


def test_a_cycle_among_the_pipelines_modules_fails_naming_both(tmp_path: Path) -> None:
    """tuning uses tune_measure; tune_measure importing tuning back (even inside a
    function) is a cycle, named by the two modules (relative to ci_bench.pipeline)."""
    shutil.copytree(
        ROOT / "ci_bench", tmp_path / "ci_bench", ignore=shutil.ignore_patterns("*.pyc")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    planted = tmp_path / "ci_bench" / "pipeline" / "tune_measure.py"
    text = planted.read_text(encoding="utf-8")
    planted.write_text(text + "\n\ndef _planted():\n    from ci_bench.pipeline import tuning\n")
    done = lint(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    broken = done.stdout.split("Broken contracts", 1)[-1]
    assert "No cycle among the pipeline's modules" in broken
    assert ".tuning -> .tune_measure" in broken or ".tune_measure -> .tuning" in broken
