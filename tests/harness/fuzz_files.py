"""Mutations of each seed file by kind: history lines, the config, the event payload.

JSON documents (results, baselines, reports, lowering files, ``pr.json``) go through
``tests/harness/fuzz_inputs.mutate_json``; ``mutate_seed`` picks the mutation for a kind and puts
the damaged copy in the input's workspace edits.
"""

from __future__ import annotations

import json
import random

from tests.harness.fuzz_inputs import (
    CONFIG_READERS,
    DIR,
    EVENT_READERS,
    HUGE_DIGITS,
    MARKUP,
    Input,
    mutate_json,
    text_mutation,
)
from tests.harness.fuzz_seeds import Seeds


def mutate_history(seed: bytes, rng: random.Random, inp: Input) -> bytes:
    """JSON Lines: one line damaged, or records that disagree (timestamps, duplicates)."""
    line = seed.decode().splitlines()[0]
    roll = rng.random()
    if roll < 0.25:
        other = json.loads(line)
        other["commit"] = "f" * 40
        other["time"] = rng.choice(["2027-01-01T00:00:00", "2025-06-01T00:00:00+02:00"])
        for case in other["cases"]:
            if "median_ms" in case:
                case["median_ms"] *= rng.choice([1.0, 1.5, 3.0])
        inp.notes.append("history: second record, timestamp naive or with offset")
        return (line + "\n" + json.dumps(other) + "\n").encode()
    damaged = mutate_json(line.encode(), rng, inp, "history")
    if not damaged.strip():  # a blank line is allowed in JSON Lines: not broken
        inp.broken_by = [(w, o) for w, o in inp.broken_by if not w.startswith("history: empty")]
        return seed + b"\n"
    if b"\n" in damaged.strip():
        damaged = json.dumps(json.loads(damaged)).encode() if not inp.broken_by else damaged
    return seed + damaged.replace(b"\n", b" ") + b"\n"


# --- config --------------------------------------------------------------------------------

CONFIG_BROKEN = [
    'confirm = "yes"',
    "warmup = true",
    'cost-model-factor = "2"',
    "repeats = 1.5",
    'kernels = "tiny_matmul"',
    "seed = -1",
    "unknown-key = 1",
    "ab-repeats = 0",
    'default-profile = "huge"',
    "case-timeout = nan",
    "adaptive-target = inf",
    f"warmup = {HUGE_DIGITS[:30]}",
    'baselines-dir = ""',
    "fail-on = 1",
    'thresholds = { mean-slowdown = "x" }',
    "x = " + "[" * 2000 + "]" * 2000,
]
# Valid lines that change no measurement setting (a resumed run must still match its file).
CONFIG_VALID = ['pr-profile = "smoke"', "confirm = false", "ab-repeats = 50", 'pr-mode = "ab"']


def mutate_config(seed: bytes, rng: random.Random, inp: Input) -> bytes | str:
    roll = rng.random()
    if roll < 0.08:
        inp.breaks("config: pyproject.toml is a directory", CONFIG_READERS)
        return DIR
    text = seed.decode()
    if roll < 0.2:
        inp.breaks("config: not TOML or not UTF-8", CONFIG_READERS)
        return rng.choice([b"[tool.ci-bench\n", seed + b"\xff", b"[tool]\nci-bench = 1\n"])
    if roll < 0.35:
        line = rng.choice(CONFIG_VALID)
        inp.valid = not inp.broken_by
    else:
        line = rng.choice(CONFIG_BROKEN)
        inp.breaks(f"config: {line[:40]}", CONFIG_READERS)
    inp.notes.append(f"config {line[:40]}")
    return text.replace("[tool.ci-bench]\n", f"[tool.ci-bench]\n{line}\n", 1).encode()


# --- events --------------------------------------------------------------------------------


def mutate_event(seed: bytes, rng: random.Random, inp: Input) -> bytes:
    doc = json.loads(seed)
    roll = rng.random()
    pr = doc["pull_request"]
    if roll < 0.3:
        pr["number"] = rng.choice([-1, 0, "2", 2**64, None, 1.5])
        inp.breaks("event: pull request number", EVENT_READERS)
    elif roll < 0.5:
        del pr[rng.choice(["head", "base", "number"])]
        inp.breaks("event: a pull request field removed", EVENT_READERS)
    elif roll < 0.7:
        return text_mutation(seed, rng, inp, "event", EVENT_READERS)
    else:
        for key in ("title", "body"):
            pr[key] = (pr.get(key) or "") + rng.choice(MARKUP)
        pr["head"]["ref"] = "evil" + rng.choice(MARKUP)
        inp.notes.append("event: markup in text")
    return json.dumps(doc).encode()


MUTATORS = {
    "config": mutate_config,
    "event": mutate_event,
    "history": mutate_history,
}


def mutate_seed(seeds: Seeds, kind: str, rng: random.Random, inp: Input) -> None:
    """Edit the workspace's copy of one seed file."""
    data = seeds.data(kind)
    if kind in MUTATORS:
        new = MUTATORS[kind](data, rng, inp)
    elif kind == "markdown":
        return
    else:
        new = mutate_json(data, rng, inp, kind)
    inp.edits[seeds.relative(kind)] = new
