"""Damage to a command line: hostile flag values, output paths, environments, a full disk.

Each function draws from the input's ``random.Random`` and records on the ``Input`` what it
did and why the result is broken (when it is), so an input is reproduced from its seed.
"""

from __future__ import annotations

import argparse
import random

from tests.harness.fuzz_inputs import (
    CANARY,
    DEVICE,
    FIFO,
    HUGE_DIGITS,
    MARKUP,
    Input,
    symlink_to,
)
from tests.harness.fuzz_recipes import ID, ROLE_RUNNER_FILES, options, output_kind

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


def path_value(command: str, action: argparse.Action, rng: random.Random, inp: Input) -> str:
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
        return [flag, path_value(command, action, rng, inp)]
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
            if role_of(inp.argv) not in PLAN_READERS:
                inp.argv += ["--role", rng.choice(sorted(PLAN_READERS))]
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
        if key in ROLE_RUNNER_FILES.get(role_of(inp.argv), set()):
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


# The roles whose workflow step is handed the plan job's CI_BENCH_PLAN.
PLAN_READERS = frozenset({"shard", "ab", "report", "comment"})


def role_of(argv: list[str]) -> str:
    """The ``ci`` role a command line runs (the last ``--role`` wins, as in argparse)."""
    given = [argv[i + 1] for i, token in enumerate(argv[:-1]) if token == "--role"]
    return given[-1] if given else "all"


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
