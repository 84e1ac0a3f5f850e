"""Command lines for every subcommand: found in the parser, never listed by hand.

``subcommands`` reads ``build_parser()``; a command with a recipe starts from a command line
that works on the seed project, any other (one added later) from its positionals and
required options. ``make_input`` then damages one thing: a seed file the command reads, a
flag's value, an output path, the GitHub environment, or the disk it writes to.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from typing import Any

from tests.harness.fuzz_files import mutate_seed
from tests.harness.fuzz_inputs import (
    CANARY,
    DEVICE,
    FIFO,
    HUGE_DIGITS,
    MARKUP,
    Input,
    symlink_to,
)
from tests.harness.fuzz_seeds import Seeds

ID = "matmul/B1-M128-K128-N128/float32"
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


def recipe(command: str, parser: argparse.ArgumentParser) -> Recipe:
    return RECIPES.get(command) or _generic(command, parser)


# --- values --------------------------------------------------------------------------------

BAD_NUMBERS = ["x", "", "nan", "inf", "-inf", "1e999", "1,5", HUGE_DIGITS]
ODD_NUMBERS = ["0", "-1", "1", "2", "3.5", str(2**64), str(2**31), "1e-300", "1e308"]
PATHS_IN = ["results.json", "report.json", "history", "ci-out", "baselines", "pyproject.toml"]


def _number_value(action: argparse.Action, rng: random.Random, inp: Input) -> str:
    if rng.random() < 0.5:
        value = rng.choice(BAD_NUMBERS)
        inp.breaks(f"{action.option_strings[0]} {value[:12]!r} is not a number")
        return value
    return rng.choice(ODD_NUMBERS)


def _text_value(action: argparse.Action, rng: random.Random, inp: Input) -> str:
    dest = action.dest
    if dest == "shard":
        value = rng.choice([f"1/{HUGE_DIGITS}", f"{HUGE_DIGITS}/2", "0/2", "3/2", "x", "1/2"])
        if value != "1/2":
            inp.breaks(f"--shard {value[:12]}")
        return value
    if dest == "repo_url":
        value = rng.choice(
            [
                *("https://github.com/octo/fuzz", "http://ghe.example/o/r"),
                *("javascript:alert(1)//ZQX", "ftp://x/y", "<b>ZQX</b>", "https://x/<b>ZQX</b>"),
            ]
        )
        if not value.startswith("http") or "<" in value:
            inp.breaks(f"--repo-url {value[:20]}: not an http(s) URL")
        return value
    if dest == "kernels":  # init: module names written into the config's TOML
        value = rng.choice(["tiny_matmul", "tpu_ops.flash", 'a"]', "a b", *MARKUP])
        if value not in ("tiny_matmul", "tpu_ops.flash"):
            inp.breaks(f"--kernels {value[:20]!r}: not a module name")
        return value
    if dest in ("kernel", "case", "kernel_module"):
        return rng.choice(["matmul", ID, "matmul/*", "nope", "../x", "tiny_matmul", CANARY])
    return rng.choice(["", "x", "v0.1.0", "HEAD", "main", "0.1.0", *MARKUP, "-x", "a" * 500])


def _path_value(command: str, action: argparse.Action, rng: random.Random, inp: Input) -> str:
    kind = output_kind(command, action)
    if kind:
        return hostile_output(command, action, kind, rng, inp)
    roll = rng.random()
    if roll < 0.3:
        inp.breaks(f"{action.option_strings[0] if action.option_strings else action.dest}: missing")
        return "missing.json"
    if roll < 0.4:
        # A name that is not UTF-8 (bytes 0xff): it may be refused, never a crash.
        source = rng.choice(["results.json", "baselines", "history", "ci-out"])
        name = "b-\udcff-" + source
        inp.edits[name] = "<copy:" + source + ">"
        inp.notes.append("a path that is not UTF-8")
        return name
    return rng.choice(PATHS_IN)


def flag_tokens(command: str, action: argparse.Action, rng: random.Random, inp: Input) -> list[str]:
    """One option with a (often hostile) value."""
    flag = rng.choice(action.option_strings)
    if action.nargs == 0:
        return [flag]
    if action.choices:
        if rng.random() < 0.3:
            inp.breaks(f"{flag}: not one of its choices")
            return [flag, "bogus"]
        return [flag, str(rng.choice(list(action.choices)))]
    name = getattr(action.type, "__name__", "")
    if name in ("integer", "int", "number", "float", "open_fraction"):
        return [flag, _number_value(action, rng, inp)]
    if name in ("path_arg", "Path") or output_kind(command, action):
        return [flag, _path_value(command, action, rng, inp)]
    if name == "shape":
        value = rng.choice(["128,128,128", "0,1,1", "x", f"1,{HUGE_DIGITS}", "1,,1"])
        if value != "128,128,128":
            inp.breaks(f"--shape {value[:12]}")
        return [flag, value]
    return [flag, _text_value(action, rng, inp)]


# --- outputs, environment, faults ------------------------------------------------------------


def hostile_output(
    command: str, action: argparse.Action, kind: str, rng: random.Random, inp: Input
) -> str:
    """A path the command is told to write: fresh, or one it must refuse."""
    flag = action.option_strings[0] if action.option_strings else action.dest
    way = rng.choice(
        ["fresh", "exists", "dir", "link", "device", "fifo", "under-file", "long", "non-utf8"]
    )
    if kind == "folder":
        way = rng.choice(["fresh", "exists-dir", "file", "device", "under-file", "long"])
    inp.notes.append(f"{flag} {way}")
    if way == "non-utf8":
        return "o-\udcff.json"
    if way in ("fresh", "exists-dir"):
        return "o-fresh" if way == "fresh" else "o-existing-dir"
    if way == "exists":
        inp.edits["o-existing.json"] = b"keep me\n"
        if "--force" not in inp.argv:
            inp.breaks(f"{flag}: an existing file without --force")
        return "o-existing.json"
    if way == "dir" or way == "file":
        target = "history" if way == "dir" else "README.md"
        inp.breaks(f"{flag}: a {'directory' if way == 'dir' else 'file'} in the way")
        return target
    if way == "link":
        inp.edits["o-target.txt"] = b"keep me\n"
        inp.edits["o-link.json"] = symlink_to("o-target.txt")
        inp.breaks(f"{flag}: a symbolic link")
        return "o-link.json"
    if way in ("device", "fifo"):
        inp.edits[f"o-{way}"] = DEVICE if way == "device" else FIFO
        inp.breaks(f"{flag}: a {way}")
        return f"o-{way}"
    if way == "under-file":
        inp.breaks(f"{flag}: under a file")
        return "README.md/o-x.json"
    inp.breaks(f"{flag}: a 300-byte name")
    return "o-" + "x" * 300 + ".json"


# Issue 31: the [tool.ci-bench] table as adopters spell it; (text, why broken or None).
TOML_SPELLINGS = [
    ('[tool."ci-bench"]\nkernels = ["old"]\nrepeats = 3\n', None),
    ('tool.ci-bench.kernels = ["old"]\n', None),
    ('tool = {ci-bench = {kernels = ["old"]}, black = {x = 1}}\n', None),
    ('[tool]\nci-bench = {kernels = ["old"]}\n', None),
    (
        '[tool.ci-bench]\nkernels = ["old"]\nnote = """\n[project]\n"""\n[project]\nname = "p"\n',
        None,
    ),
    ('[project]\nname = "p"\n# [tool.ci-bench] in a comment\n', None),
    ('[[tool.ci-bench]]\nkernels = ["old"]\n', "an array of [[tool.ci-bench]] tables"),
    ("[[tool]]\nx = 1\n", "an array of [[tool]] tables"),
    ("[tool.ci-bench\nkernels = 1\n", "not valid TOML"),
    ('[project]\nname = "a"\nname = "b"\n', "not valid TOML (a key twice)"),
]
# Forged plans (CI_BENCH_PLAN, the plan job's output read back by every later job).
FORGED_PLANS = [
    "[" * 50_000 + "]" * 50_000,
    '{"shards": 99999}',
    '{"shards": "2"}',
    "[]",
    '{"zz": 1}',
    "{" + '"a":' * 10 + "1" + "}" * 10,
    '{"shards": 1e308}',
]


def hostile_env(command: str, rng: random.Random, inp: Input) -> None:
    if command == "init":
        text, broken = rng.choice(TOML_SPELLINGS)
        inp.edits["pyproject.toml"] = text.encode()
        inp.notes.append(f"pyproject.toml {text[:30]!r}")
        if broken:
            inp.breaks(f"pyproject.toml: {broken}")
        return
    if command == "ci" and rng.random() < 0.5:
        if rng.random() < 0.5:
            inp.env["CI_BENCH_PLAN"] = rng.choice(FORGED_PLANS)
            inp.notes.append(f"CI_BENCH_PLAN {inp.env['CI_BENCH_PLAN'][:20]!r}")
            inp.breaks("CI_BENCH_PLAN: forged")
            if "--role" not in inp.argv:
                inp.argv += ["--role", rng.choice(["report", "shard", "ab", "comment"])]
        else:  # a role named for an event it does not serve
            role = rng.choice(["promote", "relay"])
            inp.argv += ["--role", role]
            inp.notes.append(f"--role {role} under {inp.env.get('GITHUB_EVENT_NAME')}")
            inp.breaks(f"--role {role} under an event it does not serve")
        return
    if command == "ci":
        key = rng.choice(["GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT"])
        way = rng.choice(["dir", "missing-folder", "fifo", "device"])
        inp.notes.append(f"{key} {way}")
        if way == "device":
            inp.edits["o-dev-env"] = DEVICE
            inp.env[key] = "o-dev-env"
            return
        if way == "fifo":
            inp.edits["o-fifo-env"] = FIFO
        inp.env[key] = {"dir": "history", "missing-folder": "nope/x.md", "fifo": "o-fifo-env"}[way]
        inp.breaks(f"{key}: {way}")
        inp.fault = f"env:{key}"
    elif command in ("history", "site"):
        url = rng.choice(["javascript:alert(1)//", "ftp://ghe", "https://ghe.example"])
        inp.env.update(GITHUB_SERVER_URL=url, GITHUB_REPOSITORY=rng.choice(["o/r", "<b>ZQX</b>"]))
        inp.notes.append(f"GITHUB_SERVER_URL {url}")
        if not url.startswith("https") or "<" in inp.env["GITHUB_REPOSITORY"]:
            inp.breaks("GITHUB_SERVER_URL/GITHUB_REPOSITORY: not an http(s) URL")
    else:
        inp.env["GITHUB_EVENT_NAME"] = rng.choice(["push", "workflow_run", "release", "x", ""])
        inp.notes.append(f"GITHUB_EVENT_NAME {inp.env['GITHUB_EVENT_NAME']!r}")


def disk_full(command: str, parser: argparse.ArgumentParser, inp: Input) -> bool:
    """Point the command's first output into the full disk (``full/``, a small tmpfs)."""
    for i, token in enumerate(inp.argv):
        action = next((a for a in options(parser) if token in a.option_strings), None)
        if action is not None and output_kind(command, action) and i + 1 < len(inp.argv):
            inp.argv[i + 1] = "full/" + inp.argv[i + 1].rsplit("/", 1)[-1]
            inp.fault = "disk-full"
            inp.breaks("disk full")
            inp.notes.append(f"{token} on a full disk")
            return True
    if command == "run":
        inp.argv += ["-o", "full/o-results.json", "--force"]
        inp.fault = "disk-full"
        inp.breaks("disk full")
        inp.notes.append("run -o on a full disk")
        return True
    return False


def make_input(
    seeds: Seeds,
    command: str,
    parser: argparse.ArgumentParser,
    rng: random.Random,
    *,
    disk: bool,
) -> Input:
    """One input for ``command``: its recipe with one or two things damaged."""
    base = recipe(command, parser)
    inp = Input(command, list(base.argv), env=dict(base.env))
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
            inp.argv += [action.option_strings[0], _path_value(command, action, rng, inp)]
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
    return inp


def weights(parsers: dict[str, Any]) -> dict[str, float]:
    """Draw cheap commands more often than those that import jax or measure."""
    return {name: 1.0 / recipe(name, p).cost for name, p in parsers.items()}
