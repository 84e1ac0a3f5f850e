"""Flags + config + event -> Request: table-driven over real webhook payloads, no jax, no CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ci_bench.errors import InputError
from ci_bench.github.context import parse_event
from ci_bench.pipeline.config import Config
from ci_bench.pipeline.request import build_request, parse_fail_on
from ci_bench.schema import FailPolicy

EVENTS = Path(__file__).parent / "fixtures" / "events"
CONFIG = Config(
    kernels=["kernels.matmul", "kernels.gla"],
    default_profile="smoke",
    pr_profile="ci",
    release_profile="full",
    repeats=20,
    ab_repeats=200,
    pr_mode="both",
    root=Path("/repo"),
)


def event(name: str, file: str, **changes: Any):
    payload = json.loads((EVENTS / f"{file}.json").read_text(encoding="utf-8"))
    for key, value in changes.items():
        payload[key] = value
    return parse_event(name, payload, payload.get("ref"))


PR = ("pull_request", "pull_request_opened")
DISPATCH_INPUTS = {
    "kernels": "matmul",
    "profile": "full",
    "repeats": "7",
    "fail_on": "error,noisy",
    "mode": "baseline",
    "baseline_version": "0.1.0",
}


@pytest.mark.parametrize(
    ("flags", "source", "changes", "expected"),
    [
        # No event: the config's default profile, the spec's repeats, baseline mode.
        ({}, None, {}, {"profile": "smoke", "repeats": 20, "ab_repeats": 200, "mode": "baseline"}),
        # A pull request: the PR profile, the config's PR mode, A/B against the merge base
        # of its head and its base commit.
        (
            {},
            PR,
            {},
            {
                "profile": "ci",
                "mode": "both",
                "base": ("merge-base", "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"),
            },
        ),
        # A dispatch with an A/B and no base: the default branch's head.
        (
            {},
            ("workflow_dispatch", "workflow_dispatch"),
            {"inputs": {"mode": "both"}},
            {"mode": "both", "base": ("default-branch", "main")},
        ),
        # A base given by hand is taken as it is.
        ({"base": "v0.1.0", "mode": "ab"}, None, {}, {"base": ("ref", "v0.1.0")}),
        # Flags win over the event.
        ({"profile": "full", "mode": "baseline"}, PR, {}, {"profile": "full", "mode": "baseline"}),
        # A dispatch's inputs fill the selection, repeats, policy and pinned version.
        (
            {},
            ("workflow_dispatch", "workflow_dispatch"),
            {"inputs": DISPATCH_INPUTS},
            {
                "kernels": ("matmul",),
                "profile": "full",
                "repeats": 7,
                "ab_repeats": 7,
                "mode": "baseline",
                "pins": {"*": "0.1.0"},
                "noisy_fails": True,
            },
        ),
        # ... but a flag still wins over a dispatch input.
        (
            {"repeats": 3, "kernel": ["gla"]},
            ("workflow_dispatch", "workflow_dispatch"),
            {"inputs": DISPATCH_INPUTS},
            {"kernels": ("gla",), "repeats": 3},
        ),
        # A library tag: the release profile, every kernel, baseline mode whatever the config.
        ({}, ("push", "push_tag"), {}, {"profile": "full", "kernels": (), "mode": "baseline"}),
        # A kernel tag selects that kernel.
        (
            {},
            ("push", "push_tag"),
            {"ref": "refs/tags/gla-v0.2.0"},
            {"profile": "full", "kernels": ("gla",), "release": ("gla", "0.2.0")},
        ),
    ],
)
def test_event_and_flags_resolve_into_one_request(flags, source, changes, expected):
    ev = event(*source, **changes) if source else None
    request = build_request(flags, CONFIG, ev)
    seen = {
        "profile": request.selection.profile,
        "kernels": request.selection.kernels,
        "repeats": request.harness.repeats,
        "ab_repeats": request.ab_harness.repeats,
        "mode": request.mode,
        "base": (request.base.kind, request.base.ref) if request.base else None,
        "pins": dict(request.baselines.pins),
        "noisy_fails": request.policy.fails("noisy"),
        "release": (request.release.kernel, request.release.version) if request.release else None,
    }
    assert {k: seen[k] for k in expected} == expected


def test_judging_given_results_on_a_pr_compares_with_baselines_unless_given_an_ab_report():
    ev = event(*PR)
    assert build_request({"results": Path("r.json")}, CONFIG, ev).mode == "baseline"
    given = {"results": Path("r.json"), "ab_report": Path("ab.json")}
    assert build_request(given, CONFIG, ev).mode == "both"


def test_a_request_is_frozen():
    request = build_request({}, CONFIG)
    with pytest.raises(AttributeError):
        request.mode = "ab"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"repeats": 0}, "--repeats must be >= 1"),
        ({"warmup": -1}, "--warmup must be >= 0"),
        ({"peak_tflops": 0.0}, "--peak-tflops must be a positive finite number"),
        ({"peak_gbps": float("inf")}, "--peak-gbps must be a positive finite number"),
        ({"adaptive": 2.0}, "--adaptive wants a relative width"),
        ({"shape": "1,x", "kernel": ["matmul"]}, "--shape wants comma-separated integers"),
        ({"shape": "128,128"}, "--shape needs exactly one --kernel"),
        ({"mode": "ab"}, "A/B mode needs a base"),
        ({"fail_on": "error,bogus"}, "--fail-on: unknown state(s) bogus"),
        ({"results": Path("r.json"), "mode": "both"}, "--results with --mode both needs"),
    ],
)
def test_bad_flags_are_one_line_input_errors(flags, message):
    with pytest.raises(InputError, match="^" + re.escape(message)):
        build_request(flags, CONFIG)


def test_a_dispatch_asking_for_an_unknown_mode_is_refused():
    ev = event("workflow_dispatch", "workflow_dispatch", inputs={"mode": "fast"})
    with pytest.raises(InputError, match="'fast' is not baseline, ab or both"):
        build_request({}, CONFIG, ev)


@pytest.mark.parametrize(
    ("text", "pins"),
    [
        ("0.1.0", {"*": "0.1.0"}),
        ("matmul=0.1.0, gla=0.2.0", {"matmul": "0.1.0", "gla": "0.2.0"}),
        ("", {}),
    ],
)
def test_baseline_version_takes_one_version_or_kernel_pairs(text, pins):
    assert dict(build_request({"baseline_version": text}, CONFIG).baselines.pins) == pins


@pytest.mark.parametrize("text", ["latest", "matmul=", "Bad Name=0.1.0", "matmul=1.0"])
def test_bad_baseline_versions_are_refused_before_measuring(text):
    with pytest.raises(InputError, match="neither VERSION nor KERNEL=VERSION"):
        build_request({"baseline_version": text}, CONFIG)


def test_fail_on_derives_from_the_verdict_table():
    assert parse_fail_on("none", FailPolicy()).fails("error") is False
    assert parse_fail_on("none", FailPolicy()).fails("regression") is True
    assert parse_fail_on("missing", FailPolicy()).fails("missing") is True
    assert parse_fail_on(None, FailPolicy()) == FailPolicy()


def loaded(imports: str, edges: tuple[str, ...]) -> list[str]:
    """The modules of ``edges`` (and their submodules) that importing ``imports`` loads, in
    a fresh interpreter."""
    code = (
        f"import json, sys\nimport {imports}\n"
        f"edges = {edges!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules\n"
        "    if m in edges or m.startswith(tuple(e + '.' for e in edges)))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_building_requests_and_judging_import_no_jax():
    """The pure rooms load without jax: their tests run in seconds."""
    imports = (
        "ci_bench.pipeline.request, ci_bench.pipeline.plan, ci_bench.judge.compare, "
        "ci_bench.judge.ab, ci_bench.outcome, ci_bench.report.render, ci_bench.schema, "
        "ci_bench.contract.matrix"
    )
    assert loaded(imports, ("jax",)) == []


def test_the_pure_request_and_plan_load_no_cli_network_or_file_store():
    """Building a request reads no flag parser, no GitHub client and no file: the config's
    type is all it needs (lint-imports checks the same statically)."""
    edges = ("argparse", "github", "requests", "urllib3", "jax", "ci_bench.store")
    edges += ("ci_bench.commands", "ci_bench.github.api", "ci_bench.pipeline.config")
    assert loaded("ci_bench.pipeline.request, ci_bench.pipeline.plan", edges) == []
