"""The comment always has room for its verdict (issue 38), through the workflows' own steps
against the GitHub fake: every section has a budget, the verdict's reserved first; the
lowering section (the pull request's own claim) is capped like every other list and says
where the rest is; no section's size ever fails the job that writes another.
"""

from __future__ import annotations

import json

from ci_bench.github.api import COMMENT_LIMIT
from ci_bench.report.sticky import BUDGETS, sections_of
from tests.harness import pipeline_fixtures
from tests.harness.github_openapi import now
from tests.harness.pipeline_fixtures import keep
from tests.harness.pipeline_repo import NUMBER, REPO, World, failures, report_of

template, jax_cache = pipeline_fixtures.template, pipeline_fixtures.jax_cache
world = pipeline_fixtures.world

# The pull request's kernel with many cases in its pull-request profile: a verdict that
# fills a good part of the comment (every case in the full matrix, collapsed).
MANY = "MatrixProfile(tuple({'N': n} for n in range(8, 40)), ('float32',))"


def forged_lowering(hints: int) -> str:
    """A lowering file as a fork's code may leave it: valid, with ``hints`` tiling hints
    (each one line of the section: an unlabelled fork made that section 64,157 characters)."""
    meta = {
        "tool_version": "0.2.0",
        "started_at": "2026-01-01T00:00:00Z",
        "platform": "tpu",
        "profile": "smoke",
        "jax": "0",
        "jaxlib": "0",
        "kernels": {"work": "0.1.0"},
        "chips": ["v5e"],
    }
    tiling = [
        {
            "case": f"work/N{n}/float32",
            "chip": "v5e",
            "config": {"units": 1},
            "modelled_us": 1.0,
            "default": {"units": 64},
            "default_us": 3.0,
        }
        for n in range(hints)
    ]
    return json.dumps({"schema_version": 4, "meta": meta, "cases": [], "tiling": tiling})


def sections(world: World) -> dict[str, str]:
    return sections_of(world.the_comment().split("\n", 1)[1])


def test_an_oversized_lowering_section_never_keeps_a_many_case_verdict_out(world):
    kernel = (world.repo / "pipeline_kernel.py").read_text()
    many = kernel.replace('"ci": _CASES, "full": _CASES', f'"ci": {MANY}, "full": {MANY}')
    many = many.replace('MISBEHAVE = ""', 'MISBEHAVE = "forge-late"')
    assert many.count("forge-late") == kernel.count("forge-late") + 1
    head = world.commit(
        "fork",
        world.base,
        "many cases, and a lowering artifact of its own",
        files={"pipeline_kernel.py": many, "forged/lowering.json": forged_lowering(620)},
    )
    # The unlabelled push: its lowering job (its own code) leaves the oversized file.
    world.on_pr(world.pull_request("synchronize", head, fork=True), lowering=True)
    _lower, relay = world.lowering_runs
    assert relay.result("relay") == "success", failures(relay)
    lowering = sections(world)["lowering"]

    # The maintainer labels and measures that head: the comment job posts its verdict.
    measured = world.on_pr(world.pull_request("labeled", head, fork=True, label="benchmark"))
    assert measured.result("comment") == "success", failures(measured)
    body = world.the_comment()
    keep(world, body)
    assert len(body) <= COMMENT_LIMIT
    # The relay held its section to its budget, saying how many rows are elsewhere.
    assert len(lowering) <= BUDGETS["lowering"]
    assert "💡 a faster tiling by the cost model (> 1.5x; a hint) in 620 cases:" in lowering
    assert "- … and 570 more (all of them: the lowering run's job summary and its " in lowering
    verdict = sections(world)["verdict"]
    cases = len(report_of(measured)["cases"])
    assert cases == 32
    assert f"<details><summary>All {cases} cases</summary>" in verdict  # whole, not cut
    assert "did not fit here" not in verdict
    assert f"`{head[:12]}`" in verdict
    assert sections(world)["lowering"] == lowering  # the relay's section, kept as it was


def test_a_section_an_older_relay_left_too_long_is_cut_and_says_so(world):
    """An older ci-bench's relay capped nothing: the comment job holds that section to its
    budget instead of failing on GitHub's limit."""
    rows = "\n".join(
        f"- `work/N{n}/float32`: a tiling 3.0x faster by the model" for n in range(1200)
    )
    old = (
        f"<!-- ci-bench sticky: benchmark|pr {NUMBER} -->\n"
        "<!-- ci-bench section: verdict -->\n### ⏳ ci-bench: measuring\n\n"
        "<!-- ci-bench section: lowering -->\n#### Lowering, cost model and correctness\n\n"
        f"<details><summary>all of them</summary>\n\n{rows}\n\n</details>\n"
    )
    assert len(old) > COMMENT_LIMIT - 2_000
    stamp = now()
    world.server.repos[REPO.lower()].comments[700] = {
        "issue": NUMBER,
        "body": old,
        "created_at": stamp,
        "updated_at": stamp,
    }
    head = world.commit("feature", world.base, "notes", NOTES="one\n")
    run = world.on_pr(world.pull_request("opened", head))
    assert run.result("comment") == "success", failures(run)
    body = world.the_comment()
    assert len(body) <= COMMENT_LIMIT
    lowering = sections(world)["lowering"]
    assert len(lowering) <= BUDGETS["lowering"]
    assert lowering.endswith("the lowering job's summary has all of it.</sub>"), lowering[-300:]
    assert lowering.count("<details>") == lowering.count("</details>")
    assert f"`{head[:12]}`" in sections(world)["verdict"]
