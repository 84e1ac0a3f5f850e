"""Command lines for every subcommand: found in the parser, never listed by hand.

``subcommands`` reads ``build_parser()``; a command with a recipe starts from a command line
that works on the seed project, any other (one added later) from its positionals and
required options. The output flags say what a command may write (the oracles check it).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from tests.harness.fuzz_seeds import SEED_FILES

ID = "matmul/B1-M128-K128-N128/float32"
SEED_BASELINE = SEED_FILES["baseline"]
GITHUB_ENV = {
    "GITHUB_EVENT_NAME": "pull_request_target",
    "GITHUB_EVENT_PATH": "events/pull_request.json",
    "GITHUB_REPOSITORY": "octo/fuzz",
    "GITHUB_RUN_ID": "7",
    "GITHUB_SERVER_URL": "https://github.com",
}
# A closed port: the API step fails at once (the config allows no retries): exit 4.
NO_API = {"GITHUB_TOKEN": "fuzz-token", "GITHUB_API_URL": "http://127.0.0.1:9"}


@dataclass(frozen=True)
class Recipe:
    argv: tuple[str, ...]
    reads: tuple[str, ...]  # seed kinds the command reads
    cost: int = 1  # relative price of one run (1: reads files; 5: imports jax; 10: measures)
    env: tuple[tuple[str, str], ...] = ()
    guessed: bool = False  # a required option holds a made-up value: it may be refused


RECIPES = {
    "compare": Recipe(
        ("compare", "results.json", "-o", "o-report.json", "--markdown", "o-report.md"),
        ("results", "baseline", "config"),
    ),
    "promote": Recipe(
        ("promote", "results.json", "--baselines-dir", "o-store", "--tag", "v0.2.0"),
        ("results", "config"),
    ),
    # The seed's baseline is the current revision's: modelled again, nothing moves.
    "remodel": Recipe(("remodel", SEED_BASELINE, "--check", "-q"), ("baseline", "config"), 5),
    "merge": Recipe(("merge", "results.json", "-o", "o-merged.json"), ("results",)),
    "plot": Recipe(
        ("plot", "results.json", "--out", "o-roofline.png", "--baseline", "results.json"),
        ("results",),
        cost=2,
    ),
    "export": Recipe(
        ("export", "results.json", "--format", "bmf", "-o", "o-bmf.json"), ("results",)
    ),
    "record": Recipe(
        ("record", "results.json", "--history", "history", "--report", "report.json"),
        ("results", "report", "history"),
    ),
    "history": Recipe(
        ("history", "--history", "history", "--results", "results.json", "--format", "json"),
        ("history", "results", "baseline", "config"),
    ),
    "site": Recipe(
        ("site", "--out", "o-site", "--history", "history", "--title", "fuzz"),
        ("history", "baseline", "config"),
        env=(("GITHUB_REPOSITORY", "octo/fuzz"), ("GITHUB_SERVER_URL", "https://github.com")),
    ),
    "comment": Recipe(
        ("comment", "--report-dir", "ci-out"),
        ("artifact_report", "pr", "event", "config"),
        env=tuple({**GITHUB_ENV, **NO_API}.items()),
    ),
    "ci": Recipe(
        (
            *("ci", "--results", "results.json", "--out-dir", "o-ci", "--mode", "baseline"),
            *("--baselines-ref", "", "--no-comment"),
        ),
        ("results", "baseline", "event", "config"),
        cost=2,
        env=tuple(
            {
                **GITHUB_ENV,
                "GITHUB_STEP_SUMMARY": "o-summary.md",
                "GITHUB_OUTPUT": "o-outputs.txt",
            }.items()
        ),
    ),
    "schema": Recipe(("schema",), ()),
    "list": Recipe(("list", "--profile", "smoke"), ("config",), cost=3),
    "check-spec": Recipe(("check-spec",), ("config",), cost=3),
    "lower": Recipe(("lower", "--platform", "tpu", "-q", "-o", "o-lowering.json"), ("config",), 5),
    # The seed run's own settings: resuming its file measures nothing and rewrites it.
    "run": Recipe(
        ("run", "--resume", "results.json", "-q", "--repeats", "5", "--warmup", "1"),
        ("results", "config"),
        cost=5,
    ),
    "ab": Recipe(
        (
            *("ab", "--base", "HEAD~1", "--repeats", "2", "--warmup", "0", "-q", "--case", ID),
            *("-o", "o-ab.json", "--markdown", "o-ab.md"),
        ),
        ("config",),
        cost=10,
    ),
    "profile": Recipe(
        ("profile", "--kernel", "matmul", "--case", ID, "--out", "o-prof", "--runs", "1"),
        ("config",),
        cost=10,
    ),
    "analyze": Recipe(
        ("analyze", "--format", "json", "-q", "-o", "o-analysis.json"), ("config",), 5
    ),
    # Adoption on the seed project: its [tool.ci-bench] block differs, so --force replaces it.
    "init": Recipe(("init", "--kernels", "tiny_matmul", "--force"), ()),
}

# ``ci`` draws one of these per input, so every role is fuzzed (the flag damage alone drew
# ``all`` 373 times in 390). Each is the role's workflow step on the seed project; the
# measuring ones time one case briefly. ``reads`` are the seed files the role opens.
# ``guessed``: its undamaged form is refused here anyway (no token, an event it does not
# serve), so an exit 2 there is no false refusal. ``all`` is RECIPES["ci"].
_QUICK = ("--case", ID, "--warmup", "0", "--repeats", "2", "-q")
_CI_ENV = dict(RECIPES["ci"].env)


def _role(
    role: str,
    *args: str,
    reads: tuple[str, ...] = (),
    cost: int = 1,
    api: bool = False,
    guessed: bool = False,
) -> Recipe:
    """A role's workflow step; ``api``: its API step fails at once (a closed port)."""
    env = {**_CI_ENV, **NO_API} if api else _CI_ENV
    argv = ("ci", "--role", role, *args)
    return Recipe(argv, reads, cost, tuple(env.items()), guessed)


ROLE_RECIPES = {
    "plan": _role("plan", reads=("event", "config")),
    "shard": _role(
        "shard", "--shard", "1/1", "--out-dir", "o-ci", *_QUICK, reads=("config",), cost=10
    ),
    "ab": _role("ab", "--out-dir", "o-ci", *_QUICK, reads=("event", "config"), cost=10),
    "report": _role(
        "report",
        *("--results", "shards", "--out-dir", "o-ci", "--no-comment"),
        reads=("results", "baseline", "event", "config"),
    ),
    "comment": _role(
        "comment",
        *("--report-dir", "ci-out"),
        reads=("artifact_report", "pr", "event", "config"),
        api=True,
        guessed=True,
    ),
    "lower": _role("lower", "--out-dir", "o-ci", *_QUICK, reads=("event", "config"), cost=10),
    "relay": _role("relay", "--report-dir", "ci-out", api=True, guessed=True),
    "promote": _role("promote", "--out-dir", "o-ci", guessed=True),
    "record": _role("record", "--out-dir", "o-ci", *_QUICK, cost=10, api=True, guessed=True),
}
# The runner files each role writes (the others never open them: a damaged one is no input
# of theirs): ``all`` and ``report`` publish, ``plan`` sets the workflow's step outputs;
# ``promote`` would add its summary, but never gets that far under the seed's pull request.
ROLE_RUNNER_FILES = {
    "all": {"GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"},
    "report": {"GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"},
    "plan": {"GITHUB_OUTPUT"},
}
# Files a role's step finds in place (the report role's shards artifact): path -> seed kind.
ROLE_FILES = {"report": (("shards/results-1.json", "results"),)}


# Output flags of each command (for a parser that does not declare them itself): files
# and folders a command may write; nothing else in the workspace may change.
STATIC_OUTPUTS = {
    ("run", "output"): "file",
    ("ab", "output"): "file",
    ("ab", "markdown"): "file",
    ("compare", "output"): "file",
    ("compare", "markdown"): "file",
    ("merge", "output"): "file",
    ("plot", "out"): "file",
    ("lower", "output"): "file",
    ("export", "output"): "file",
    ("analyze", "output"): "file",
    ("profile", "out"): "folder",
    ("ci", "out_dir"): "folder",
    ("record", "history"): "folder",
    ("site", "out"): "folder",
    ("promote", "baselines_dir"): "folder",
}
# What ``init`` writes under its --dir (the repository root): its adoption files.
INIT_OUTPUTS = (
    {"pyproject.toml", "baselines", "baselines/README.md"},  # the folder: a file added
    {".github", "constraints"},
)
# Outputs that are documented exceptions to "never replace an existing file".
REPLACEABLE = {("run", "resume")}


def subcommands() -> dict[str, argparse.ArgumentParser]:
    from ci_bench.commands.parser import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a
        for a in parser._actions
        if a.option_strings and not isinstance(a, argparse._HelpAction | argparse._VersionAction)
    ]


def output_kind(command: str, action: argparse.Action) -> str | None:
    """'file' or 'folder' when the flag names something the command writes."""
    declared = getattr(action, "output", None)
    if declared is not None:
        return declared.kind
    return STATIC_OUTPUTS.get((command, action.dest))


def _generic(command: str, parser: argparse.ArgumentParser) -> Recipe:
    """A command line from the parser alone: a seed file per positional, required options."""
    argv: list[str] = [command]
    for action in parser._actions:
        if action.option_strings or isinstance(action, argparse._SubParsersAction):
            continue
        if action.nargs in ("*", "?"):
            continue
        argv.append("results.json")
    guessed = False
    for action in options(parser):
        if action.required:
            value = action.choices and next(iter(action.choices))
            argv += [action.option_strings[0], str(value or "o-out")]
            guessed = guessed or not value
    # It reads the results file only when a positional names it (``tune`` reads none: a
    # damaged results.json it never opens is not an input it passed silently).
    reads = ("results", "config") if "results.json" in argv else ("config",)
    return Recipe(tuple(argv), reads, cost=3, guessed=guessed)


def recipe(command: str, parser: argparse.ArgumentParser, role: str | None = None) -> Recipe:
    """The command's recipe; for ``ci``, that of ``role`` (``all``: the plain one)."""
    if command == "ci" and role in ROLE_RECIPES:
        return ROLE_RECIPES[role]
    if command == "ci" and role not in (None, "all"):  # a role added later: refusals not judged
        base = RECIPES["ci"]
        return Recipe(("ci", "--role", str(role), "--out-dir", "o-ci"), (), 2, base.env, True)
    return RECIPES.get(command) or _generic(command, parser)
