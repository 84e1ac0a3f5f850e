"""What the public comment says, and what it keeps to the logs (issue 38), through the
workflows' own steps against the GitHub fake: a worker's last words name the file, never
the runner's own layout (its interpreter's install path, its home folder).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import pipeline_fixtures
from tests.harness.pipeline_fixtures import _world, keep
from tests.harness.pipeline_repo import World, failures, git, report_of

template, jax_cache = pipeline_fixtures.template, pipeline_fixtures.jax_cache


@pytest.fixture
def ab_only(template: Path, tmp_path: Path, jax_cache: Path) -> Iterator[World]:
    """The A/B alone (pr-mode ab): the pairs run in workers."""
    yield from _world(template, tmp_path, jax_cache, "ab")


def test_a_merge_base_crash_names_the_frame_not_the_runners_install_path(ab_only):
    world = ab_only
    broken = world.commit("crashing", world.base, "a crash", MISBEHAVE="crash")
    git(world.repo, "branch", "-f", "master", broken)
    fixed = world.commit("feature", broken, "the crash fixed", MISBEHAVE="")
    run = world.on_pr(world.pull_request("opened", fixed, base=broken))
    assert run.result("comment") == "success", failures(run)
    body = world.the_comment()
    keep(world, body)
    install = str(Path(ctypes.__file__).resolve().parents[1])  # .../lib/python3.X
    case = {c["id"]: c for c in report_of(run)["cases"]}["work/N192/float32"]
    assert install in case["reason"]  # the report (an artifact, for the logs) keeps it
    assert "the merge base's kernel crashed" in body
    assert install not in body
    assert str(Path.home()) not in body
    assert 'File "…/ctypes/__init__.py"' in body  # the frame, by the module's own path
