"""The fuzzer in CI: every subcommand, inputs mutated from a real run, outputs read back.

In this process (fast) for a fixed set of inputs per subcommand, then a small sample
through real processes (real exit codes and signals; each start costs about a second). The
inputs are drawn from ``random.Random(f"{SEED}:{command}:{i}")``, so a failure reproduces on
any machine. The long run is benchmarks/fuzz.py (thousands of real processes).
"""

from __future__ import annotations

import argparse
import os
import random
from pathlib import Path

import pytest

from ci_bench.pipeline.plan import ROLES
from tests.conftest import REPO
from tests.harness.fuzz_commands import RECIPES, make_input, recipe, role_choices, subcommands
from tests.harness.fuzz_inputs import Input
from tests.harness.fuzz_recipes import ROLE_RECIPES
from tests.harness.fuzz_seeds import make_seeds
from tests.harness.fuzzing import attempt, tmpfs_available

SEED = 18
PARSERS = subcommands()
# Inputs per subcommand in this process: CI keeps the file near two minutes; FUZZ_EXAMPLES
# raises it. Commands that import jax or measure get fewer.
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "24"))
# Failures that belong to call sites this branch does not own yet (the pipeline's files):
# listed, so that anything else fails the test. Remove an entry once its owner fixes it.
PENDING: dict[str, str] = {}


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    """One real project and its outputs (a real run, promote, compare, record, lower, ci)."""
    return make_seeds(tmp_path_factory.mktemp("fuzz-seeds"), cache=REPO / ".cache" / "jax")


def _examples(command: str) -> int:
    cost = recipe(command, PARSERS[command]).cost
    return max(1, EXAMPLES // cost)


def _inputs(seeds, command: str, count: int, *, disk: bool) -> list[Input]:
    parser = PARSERS[command]
    return [
        make_input(seeds, command, parser, random.Random(f"{SEED}:{command}:{i}"), disk=disk)
        for i in range(count)
    ]


def _unexpected(failures) -> list[str]:
    return [str(f) for f in failures if str(f) not in PENDING]


def test_every_subcommand_is_fuzzed():
    """Commands come from the parser; one added later gets a command line from it alone."""
    assert set(RECIPES) <= set(PARSERS)
    parser = argparse.ArgumentParser(prog="x")
    sub = parser.add_subparsers(dest="command")
    new = sub.add_parser("frobnicate")  # a name no ci-bench command has (yet)
    assert "frobnicate" not in PARSERS
    new.add_argument("results")
    new.add_argument("--output", "-o", required=True)
    new.add_argument("--depth", type=int)
    generic = recipe("frobnicate", new)
    assert generic.argv == ("frobnicate", "results.json", "--output", "o-out")


def test_every_ci_role_is_fuzzed(seeds):
    """``ci`` inputs spread over the parser's roles, each from its own workflow step (the
    flag damage alone had drawn the default role for 373 of 390 ``ci`` inputs)."""
    roles = role_choices(PARSERS["ci"])
    assert set(roles) == set(ROLES) == set(ROLE_RECIPES) | {"all"}
    for role, base in ROLE_RECIPES.items():
        assert base.argv[:3] == ("ci", "--role", role)
    drawn = [
        make_input(seeds, "ci", PARSERS["ci"], random.Random(f"roles:{i}"), disk=False)
        for i in range(200)
    ]
    assert {inp.notes[0] for inp in drawn} == {f"role {r}" for r in roles}
    report = next(inp for inp in drawn if inp.notes[0] == "role report")
    assert "shards/results-1.json" in report.edits  # its shards artifact is in place


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_hostile_inputs_keep_the_promise_in_process(seeds, command):
    found = []
    disk = tmpfs_available() is None
    for inp in _inputs(seeds, command, _examples(command), disk=disk):
        failures, _ = attempt(seeds, inp, PARSERS[command], mode="inprocess", timeout=120)
        found += [f"{f} <- {inp.label()} {inp.argv}" for f in _unexpected(failures)]
    assert not found, "\n".join(found)


# A real process each: a crash's exit code, a hang, a full disk, a step summary folder.
REAL = [
    ("compare", 3),
    ("history", 5),
    ("merge", 11),
    ("ci", 2),
    ("promote", 7),
    ("site", 4),
    ("export", 9),
    ("comment", 1),
]


@pytest.mark.parametrize(("command", "index"), REAL)
def test_a_sample_through_real_processes(seeds, command, index):
    (inp,) = _inputs(seeds, command, index + 1, disk=tmpfs_available() is None)[index:]
    failures, outcome = attempt(seeds, inp, PARSERS[command], mode="exec", timeout=120)
    assert outcome.code is not None, f"signal {outcome.signal}, hung {outcome.hung}"
    assert not _unexpected(failures), f"{failures} <- {inp.label()} {inp.argv}"


def test_the_oracles_catch_what_they_promise(seeds, tmp_path):
    """A fuzzer whose oracles never fire proves nothing: each one is shown failing here."""
    from tests.harness.fuzzing import Outcome, Workspace, judge

    parser = PARSERS["compare"]
    cases = {
        "crash": (Outcome(5, "", "ci-bench: internal error: ValueError: x"), False, None),
        "silent-pass": (Outcome(0, "", ""), True, None),
        "false-refusal": (Outcome(2, "", "ci-bench: error: no"), False, "valid"),
        "hang": (Outcome(None, "", "", hung=True), False, None),
        "injection": (Outcome(1, "Device: x\u2028 ::add-mask::ZQX\n", ""), False, None),
    }
    for kind, (outcome, broken, valid) in cases.items():
        inp = Input("compare", ["compare", "results.json"])
        if broken:
            inp.breaks("made up")
        inp.valid = valid == "valid"
        ws = Workspace.create(seeds, inp, tmp_path)
        try:
            kinds = [f.kind for f in judge(inp, outcome, ws, parser)]
        finally:
            ws.remove()
        assert kind in kinds, (kind, kinds)
    # An output with markup from input, or NaN, is invalid; one outside the named paths too.
    inp = Input("compare", ["compare", "results.json", "--markdown", "o.md", "-o", "o.json"])
    ws = Workspace.create(seeds, inp, tmp_path)
    try:
        (ws.work / "o.md").write_text("| <b>ZQX</b> | [x](https://evil.example) |\n")
        (ws.work / "o.json").write_text('{"a": NaN}')
        (ws.work / "stray.txt").write_text("x")
        kinds = [f.signature for f in judge(inp, Outcome(1, "", ""), ws, parser)]
    finally:
        ws.remove()
    assert any("outside its named paths" in k for k in kinds), kinds
    assert any("raw HTML from input" in k for k in kinds), kinds
    assert any("not strict JSON" in k for k in kinds), kinds
    # ci-bench's own annotations are commands on purpose; anything else in either stream,
    # or the runner's older ##[ form anywhere in a line, is an injection.
    from tests.harness.fuzz_outputs import injection_problem

    assert injection_problem("::error title=ci-bench regression%3A x::x: slower\n") is None
    assert injection_problem("ok\r::set-output name=v::pass") is not None
    assert injection_problem("a ##[group]b") is not None


def test_the_full_disk_fault_is_exercised_or_skipped_with_a_reason(seeds, tmp_path):
    why = tmpfs_available()
    if why:
        pytest.skip(why)
    inp = Input("merge", ["merge", "results.json", "-o", "full/m.json"])
    inp.fault = "disk-full"
    inp.breaks("disk full")
    failures, outcome = attempt(seeds, inp, PARSERS["merge"], mode="exec", parent=tmp_path)
    assert outcome.code == 2, outcome.err
    assert "no space left" in outcome.err
    assert not failures, failures


def test_seeds_are_real_run_outputs(seeds):
    """What every input starts from: a measured run and what each command made of it."""
    import json

    results = json.loads(seeds.data("results"))
    assert results["meta"]["complete"] is True
    assert all(c["pallas"]["samples_ms"] for c in results["cases"])
    assert Path(seeds.path("history")).suffix == ".jsonl"
    assert json.loads(seeds.data("pr"))["head_sha"] == results["meta"]["git"]["commit"]
