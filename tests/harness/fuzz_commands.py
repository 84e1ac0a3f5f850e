"""Command lines for every subcommand: found in the parser, never listed by hand.

``subcommands`` reads ``build_parser()``; a command with a recipe starts from a command line
that works on the seed project, any other (one added later) from its positionals and
required options. ``make_input`` then damages one thing: a seed file the command reads, a
flag's value, an output path, the GitHub environment, or the disk it writes to.

The recipes live in ``fuzz_recipes``, the damage in ``fuzz_damage``; this module draws
between them and re-exports both (the fuzzer and its tests import from here).
"""

from __future__ import annotations

import argparse
import random
from typing import Any

from tests.harness.fuzz_damage import (
    BAD_NUMBERS,
    FORGED_PLANS,
    ODD_NUMBERS,
    PATHS_IN,
    TOML_SPELLINGS,
    disk_full,
    flag_tokens,
    hostile_env,
    hostile_output,
    path_value,
)
from tests.harness.fuzz_files import mutate_seed
from tests.harness.fuzz_inputs import Input
from tests.harness.fuzz_recipes import (
    GITHUB_ENV,
    ID,
    INIT_OUTPUTS,
    NO_API,
    RECIPES,
    REPLACEABLE,
    ROLE_FILES,
    STATIC_OUTPUTS,
    Recipe,
    options,
    output_kind,
    recipe,
    subcommands,
)
from tests.harness.fuzz_seeds import Seeds

__all__ = [
    "BAD_NUMBERS",
    "FORGED_PLANS",
    "GITHUB_ENV",
    "ID",
    "INIT_OUTPUTS",
    "NO_API",
    "ODD_NUMBERS",
    "PATHS_IN",
    "RECIPES",
    "REPLACEABLE",
    "STATIC_OUTPUTS",
    "TOML_SPELLINGS",
    "Recipe",
    "disk_full",
    "flag_tokens",
    "hostile_env",
    "hostile_output",
    "make_input",
    "options",
    "output_kind",
    "recipe",
    "subcommands",
    "weights",
]


def make_input(
    seeds: Seeds,
    command: str,
    parser: argparse.ArgumentParser,
    rng: random.Random,
    *,
    disk: bool,
) -> Input:
    """One input for ``command``: its recipe with one or two things damaged (``ci``: the
    recipe of a role drawn from the parser's ``--role`` choices)."""
    role = rng.choice(role_choices(parser)) if command == "ci" else None
    base = recipe(command, parser, role)
    inp = Input(command, list(base.argv), env=dict(base.env), cost=base.cost)
    if role:
        inp.notes.append(f"role {role}")
    roll = rng.random()
    if roll < 0.12:
        inp.valid = True
        inp.notes.append("valid")
    elif roll < 0.55 and base.reads:
        mutate_seed(seeds, rng.choice(base.reads), rng, inp)
    elif roll < 0.78:
        actions = options(parser)
        for action in rng.sample(actions, min(len(actions), rng.randint(1, 3))):
            tokens = flag_tokens(command, action, rng, inp)
            inp.notes.append(" ".join(tokens)[:60])
            if "--force" not in tokens or rng.random() < 0.5:
                inp.argv += tokens
    elif roll < 0.88:
        outputs = [a for a in options(parser) if output_kind(command, a)]
        if outputs:
            action = rng.choice(outputs)
            inp.argv += [action.option_strings[0], path_value(command, action, rng, inp)]
        else:
            hostile_env(command, rng, inp)
    elif roll < 0.95 or not disk or not disk_full(command, parser, inp):
        hostile_env(command, rng, inp)
    if "--force" in inp.argv:  # drawn after the output: it makes an existing one fair game
        inp.broken_by = [(w, o) for w, o in inp.broken_by if "without --force" not in w]
    if "--no-baselines" in inp.argv:  # the baseline folder is not read at all
        inp.broken_by = [(w, o) for w, o in inp.broken_by if "--baselines-dir" not in w]
    if base.guessed:  # ``preview --base o-out``: refusing a made-up value is no false refusal
        inp.valid = False
        if inp.fault == "disk-full":  # refused for the guess before it writes a byte
            inp.fault = None
    for dest, kind in ROLE_FILES.get(role or "", ()):  # the seed, damaged or not, in place
        rel = seeds.relative(kind)
        inp.edits[dest] = inp.edits.pop(rel) if rel in inp.edits else seeds.data(kind)
    return inp


def role_choices(parser: argparse.ArgumentParser) -> list[str]:
    """``ci``'s roles, as its parser lists them (a role added later is fuzzed too)."""
    action = next((a for a in options(parser) if "--role" in a.option_strings), None)
    return list(action.choices) if action and action.choices else ["all"]


def weights(parsers: dict[str, Any]) -> dict[str, float]:
    """Draw cheap commands more often than those that import jax or measure."""
    return {name: 1.0 / recipe(name, p).cost for name, p in parsers.items()}
