"""The pull request's "a faster tiling exists" line (issue 30), through the workflows' own
steps (``tests/harness/workflow_runner.py``) and the GitHub fake: the lower job searches the
tunables of the pull request's kernel with the cost model, and the relay writes one line per case
whose modelled best tiling beats the shipped default, into the one sticky comment; a hint
in the lowering section (the pull request's claim), never the verdict, never a red check.
"""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from ci_bench.report.sticky import sections_of, tiling_lines
from ci_bench.schema.lowering import LoweringResults
from tests.harness import pipeline_fixtures
from tests.harness.pipeline_fixtures import keep
from tests.harness.pipeline_repo import World, failures

# The pipeline tests' world (pull requests against the stored baselines), its fixtures.
template, jax_cache = pipeline_fixtures.template, pipeline_fixtures.jax_cache
world = pipeline_fixtures.world

# The pipeline kernel with its unit count as a tunable: the model times 64 units far above
# one (the same result: the kernel normalises), so a default of 64 ships a slow "tiling".
TUNABLE = """
import dataclasses

from ci_bench.spec import Tunables


def work_units(a, b, units=UNITS):
    return _work(a, b, units=units)


SPEC = dataclasses.replace(
    SPEC,
    tunables=Tunables(
        space={{"units": (1, 64)}},
        default={{"units": {default}}},
        build=lambda config: functools.partial(work_units, **config),
    ),
)
"""


def _pr_with_default(world: World, default: int) -> str:
    kernel = (world.repo / "pipeline_kernel.py").read_text()
    head = world.commit(
        f"units-{default}",
        world.base,
        f"the kernel declares its tunables, default units={default}",
        files={"pipeline_kernel.py": kernel + TUNABLE.format(default=default)},
    )
    world.on_pr(world.pull_request("opened", head), lowering=True)
    lower, relay = world.lowering_runs
    assert lower.result("lower") == "success", failures(lower)
    assert relay.result("relay") == "success", failures(relay)
    return world.the_comment()


def test_a_slow_default_tiling_gets_the_faster_tiling_line_and_the_check_stays_green(world):
    body = _pr_with_default(world, 64)
    keep(world, body)
    lowering = sections_of(body)["lowering"]
    assert "a faster tiling by the cost model (> 1.5x; a hint) in 2 cases:" in lowering
    for n in (128, 192):
        (line,) = [x for x in lowering.splitlines() if x.startswith(f"- `work/N{n}/float32`:")]
        assert "x faster by the model exists on " in line, line
        assert ": (1), " in line, line
    assert "faster tiling" not in sections_of(body).get("verdict", "")  # a hint, not a verdict
    # The lower job's file records it per case and chip, the shipped default beside it.
    (lower, _relay) = world.lowering_runs
    doc = json.loads(next(lower.artifacts.rglob("lowering.json")).read_text())
    assert doc["schema_version"] == 6
    hint = doc["tiling"][0]
    assert hint["config"] == {"units": 1}
    assert hint["default"] == {"units": 64}
    assert hint["default_us"] > 1.5 * hint["modelled_us"]


def test_a_good_default_tiling_gets_no_line(world):
    body = _pr_with_default(world, 1)
    assert "faster tiling" not in body
    assert "cases lower for TPU" in body


def _lowering(hints: list[dict]) -> LoweringResults:
    meta = {
        "tool_version": "0",
        "started_at": "2026-01-01T00:00:00Z",
        "platform": "tpu",
        "profile": "ci",
        "jax": "0",
        "jaxlib": "0",
        "kernels": {},
    }
    return LoweringResults.model_validate({"meta": meta, "cases": [], "tiling": hints})


def test_the_claimed_hint_is_escaped_and_many_are_collapsed():
    hostile = {
        "case": "x/<img src=x>",
        "chip": "@team",
        "config": {"b": "[link](https://evil)"},
        "modelled_us": 1.0,
        "default": {"b": "ok"},
        "default_us": 3.0,
    }
    text = "\n".join(tiling_lines(_lowering([hostile]), 1.5, 10))
    assert "<img" not in text
    assert "[link](https" not in text
    assert "@team" not in text  # no mention: a zero-width joiner breaks it
    many = [{**hostile, "case": f"c{i}", "chip": "v5e"} for i in range(12)]
    text = "\n".join(tiling_lines(_lowering(many), 1.5, 10))
    assert "<details><summary>all of them</summary>" in text
    assert text.count("\n- `c") == 12
    assert tiling_lines(_lowering(many), 3.0, 10) == []  # 3.0x is not above 3.0x
    with pytest.raises(ValidationError):  # a figure the model cannot give is refused
        _lowering([{**hostile, "modelled_us": 0}])
