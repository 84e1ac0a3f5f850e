"""A release tag keeps the released version's tuned configs with its baselines: validated
before anything is measured, named in the promotion's summary (``ci-bench ci`` on a tag
push, against the GitHub fake)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from ci_bench.errors import ExitCode
from ci_bench.schema.tune import TunedEntry, TunedFile
from kernels.matmul import VERSION
from tests.conftest import run_cli
from tests.harness.cli_ci import RELEASE, server, workspace  # noqa: F401 (fixtures)
from tests.harness.cli_ci_events import tag_env

CASE = "matmul/B1-M128-K128-N128/bfloat16"
BLOCKS = {"block_m": 128, "block_k": 128, "block_n": 128}
TAG = f"matmul-v{VERSION}"  # the kernel's own version: a release of what the SPEC declares
TUNED = f"matmul_v{VERSION}.tuned.v5e.json"


def _tuned(folder, config: dict) -> None:
    entry = TunedEntry(
        params={"B": 1, "M": 128, "K": 128, "N": 128},
        dtype="bfloat16",
        config=config,
        default=BLOCKS,
        modelled_us=1.0,
        candidates=1,
    )
    tuned = TunedFile(
        kernel="matmul",
        version=VERSION,
        chip="v5e",
        tool_version="0.2.0",
        jax="0.0.0",
        updated=datetime.now(UTC),
        cases={CASE: entry},
    )
    (folder / "baselines").mkdir(exist_ok=True)
    path = folder / "baselines" / TUNED
    path.write_text(tuned.model_dump_json(indent=2))


def test_a_release_keeps_the_tuned_configs_beside_the_promoted_baselines(server, workspace):  # noqa: F811
    env = tag_env(server, workspace, TAG)
    _tuned(workspace, BLOCKS)
    done = run_cli("ci", *RELEASE, cwd=workspace, env=env)
    assert done.returncode == ExitCode.OK, done.stderr
    assert f"- tuned configs kept: {TUNED}" in done.stdout
    assert len(server.commits) == 1


def test_a_broken_tuned_file_stops_the_release_before_it_measures(server, workspace):  # noqa: F811
    env = tag_env(server, workspace, TAG)
    _tuned(workspace, {**BLOCKS, "block_k": 100})  # not a multiple of 128: the SPEC refuses it
    done = run_cli("ci", *RELEASE, cwd=workspace, env=env)
    assert done.returncode == ExitCode.USAGE
    assert f"tuned configs: {TUNED}" in done.stderr
    assert "block_k must be a multiple of 128, got 100" in done.stderr
    assert server.commits == []
    assert not (workspace / "ci-bench-out" / "results.json").exists()
    assert json.loads((workspace / "baselines" / TUNED).read_text())
