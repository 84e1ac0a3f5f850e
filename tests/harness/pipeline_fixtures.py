"""The pipeline tests' worlds: a template repository, the runners' JAX cache, a world per
pull-request mode (the fake GitHub checked on the way out), and the comment kept.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.pipeline_repo import World, make_template, new_world


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_template(tmp_path_factory.mktemp("template"))


@pytest.fixture(scope="module")
def jax_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runners' JAX compilation cache: outside every workspace, shared across runs (as
    a runner's tool cache is): one folder per test worker, so a kernel compiles once per
    worker, not once per module (a key is the compiled program's: a changed kernel misses)."""
    return tmp_path_factory.getbasetemp() / "tool-cache" / "ci-bench" / "jax"


def _world(template: Path, tmp_path: Path, jax_cache: Path, mode: str) -> Iterator[World]:
    world, server = new_world(template, tmp_path, jax_cache, mode)
    try:
        yield world
        server.assert_no_violations()
    finally:
        server.__exit__(None, None, None)


@pytest.fixture
def world(template, tmp_path, jax_cache) -> Iterator[World]:
    """Pull requests compared with the stored baselines only (no A/B job)."""
    yield from _world(template, tmp_path, jax_cache, "baseline")


@pytest.fixture
def ab_world(template, tmp_path, jax_cache) -> Iterator[World]:
    """The default pull-request mode: the A/B against the merge base decides."""
    yield from _world(template, tmp_path, jax_cache, "both")


def keep(world: World, body: str, name: str = "comment.md") -> None:
    """The comment a scenario checked, kept beside its runs for a reader, and in
    ``$CI_BENCH_TEST_ARTIFACTS`` (``.ci/run`` sets it to its output folder)."""
    (world.runner.root / name).write_text(body)
    folder = os.environ.get("CI_BENCH_TEST_ARTIFACTS")
    if folder:
        test = os.environ.get("PYTEST_CURRENT_TEST", "test").split("::")[-1].split(" ")[0]
        target = Path(folder) / "pipeline" / test
        target.mkdir(parents=True, exist_ok=True)
        (target / name).write_text(body)
