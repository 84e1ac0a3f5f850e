"""The fuzz oracles: what a command must never do with an input, and how it broke.

``judge`` takes an input, what its process did and the workspace after it, and returns the
failures: crash, hang, silent pass, false refusal, invalid output, fault unreported (see
tests/harness/fuzzing.py). A failure's signature names the command and the cause, not the input, so
one bug counts once however many inputs hit it.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import stat
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tests.harness.fuzz_commands import INIT_OUTPUTS, REPLACEABLE, options, output_kind
from tests.harness.fuzz_inputs import DEVICE, FIFO, Input

if TYPE_CHECKING:
    from tests.harness.fuzzing import Outcome, Workspace

DOCUMENTED_EXITS = {0, 1, 2, 3, 4, 130, 143}
ESCAPED = 120  # tests/harness/fuzz_entry.py, benchmarks/fuzz.py: an exception escaped main
ERROR_LINE = re.compile(r"^ci-bench( [\w-]+)?: error: \S")


@dataclass
class Failure:
    kind: str  # crash, hang, silent-pass, false-refusal, invalid-output, fault-unreported,
    # injection (an output line a runner reads as a workflow command)
    signature: str  # what makes it distinct (command and cause, no input details)
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.kind}: {self.signature}"


# --- named outputs ---------------------------------------------------------------------------


def named_outputs(inp: Input, parser: argparse.ArgumentParser) -> tuple[set[str], set[str]]:
    """(files, folders) the command was told to write; nothing else may change."""
    files: set[str] = set()
    folders: set[str] = set()
    given: dict[str, str] = {}
    actions = options(parser)
    for i, token in enumerate(inp.argv[:-1]):
        for action in actions:
            if token in action.option_strings and action.nargs != 0:
                given[action.dest] = inp.argv[i + 1]
                kind = output_kind(inp.command, action)
                if kind:
                    (files if kind == "file" else folders).add(os.path.normpath(inp.argv[i + 1]))
    for action in actions:
        kind = output_kind(inp.command, action)
        if kind and action.dest not in given and action.default is not None:
            (files if kind == "file" else folders).add(os.path.normpath(str(action.default)))
    for dest in ("resume",):
        if (inp.command, dest) in REPLACEABLE and dest in given and "output" not in given:
            files.add(os.path.normpath(given[dest]))
    if inp.command == "promote" and "baselines_dir" not in given:
        folders.add("baselines")
    if inp.command == "remodel" and "--check" not in inp.argv:
        folders.add("baselines")  # the baselines it names, rewritten in place
    if inp.command == "tune" and "--write" in inp.argv:
        folders.add("baselines")  # --write keeps each chip's winner in the config's store
    if inp.command == "init":
        root = given.get("dir", ".")
        files.add(os.path.normpath(root))  # the folder itself: files added to it
        files |= {os.path.normpath(Path(root) / f) for f in INIT_OUTPUTS[0]}
        folders |= {os.path.normpath(Path(root) / f) for f in INIT_OUTPUTS[1]}
    for key in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"):
        if key in inp.env:
            files.add(os.path.normpath(inp.env[key]))
    return files, folders


def _inside(rel: str, files: set[str], folders: set[str]) -> bool:
    if rel in files:
        return True
    return any(rel == f or rel.startswith(f.rstrip("/") + "/") for f in folders if f != ".")


# --- oracles ---------------------------------------------------------------------------------


def _where(text: str) -> str:
    """``Type at file:line`` of a traceback's last frame."""
    frames = re.findall(r'File "([^"]+)", line (\d+)', text)
    kind = re.findall(r"^(\w+(?:Error|Exception|Interrupt|Exit|Warning)?):", text, re.MULTILINE)
    at = f"{Path(frames[-1][0]).name}:{frames[-1][1]}" if frames else "?"
    return f"{kind[-1] if kind else 'exception'} at {at}"


def _crash_signature(outcome: Outcome, ws: Workspace) -> str:
    match = re.search(r"the traceback is in (\S+?)\)", outcome.err)
    if match and Path(match[1]).is_file():
        return _where(Path(match[1]).read_text(errors="replace"))
    first = re.search(r"internal error: (\w+)", outcome.err)
    return f"{first[1] if first else 'internal error'} (no log)"


def _normal(text: str) -> str:
    """A message without its variable parts, so one cause gives one signature."""
    text = re.sub(r"(?<![\w])/(?:[\w.+-]+/)+[\w.+-]*", "PATH", text)
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    return re.sub(r"\d+", "N", text)[:140]


def judge_process(inp: Input, outcome: Outcome, ws: Workspace) -> list[Failure]:
    cmd = inp.command
    if outcome.hung:
        why = inp.broken or "; ".join(inp.notes) or "as recorded"
        return [Failure("hang", f"{cmd}: {_normal(why)}", inp.label())]
    if outcome.escaped is not None:
        tb = "".join(traceback.format_exception(outcome.escaped))
        return [Failure("crash", f"{cmd}: escaped main: {_where(tb)}", tb[-2000:])]
    if outcome.signal is not None:
        name = signal.Signals(outcome.signal).name
        return [Failure("crash", f"{cmd}: killed by {name}", outcome.err[-2000:])]
    if outcome.code == 5:
        return [Failure("crash", f"{cmd}: {_crash_signature(outcome, ws)}", outcome.err[-2000:])]
    if outcome.code == ESCAPED:
        where = _where(outcome.err)
        return [Failure("crash", f"{cmd}: escaped main: {where}", outcome.err[-2000:])]
    if outcome.code not in DOCUMENTED_EXITS:
        return [Failure("crash", f"{cmd}: exit {outcome.code}", outcome.err[-2000:])]
    found = []
    errors = [line for line in outcome.err.splitlines() if ERROR_LINE.match(line)]
    if outcome.code == 2 and (len(errors) != 1 or "Traceback (most recent" in outcome.err):
        found.append(
            Failure("invalid-output", f"{cmd}: exit 2 with {len(errors)} error lines", outcome.err)
        )
    broken = inp.broken
    if broken and outcome.code == 0:
        found.append(Failure("silent-pass", f"{cmd}: {_normal(broken)}", inp.label()))
    if inp.valid and outcome.code == 2:
        why = errors[0] if errors else outcome.err.strip()[-200:]
        found.append(Failure("false-refusal", f"{cmd}: {_normal(why)}", inp.label()))
    if inp.fault == "disk-full" and outcome.code != 0:
        said = outcome.err.lower()
        if outcome.code != 2 or not ("no space" in said or "quota" in said):
            found.append(
                Failure("fault-unreported", f"{cmd}: a full disk gave exit {outcome.code}", said)
            )
    return found


def judge_files(
    inp: Input, outcome: Outcome, ws: Workspace, parser: argparse.ArgumentParser
) -> list[Failure]:
    """What changed in the workspace: only named paths, each valid for its reader."""
    from tests.harness.fuzz_outputs import check_file, check_stdout, injection_problem

    cmd = inp.command
    files, folders = named_outputs(inp, parser)
    after = ws.snapshot()
    found = []
    changed = [rel for rel, info in after.items() if ws.before.get(rel) != info]
    removed = [rel for rel in ws.before if rel not in after]
    for rel in changed + removed:
        if not _inside(rel, files, folders) and not _inside(str(Path(rel).parent), files, folders):
            what = "removed" if rel in removed else "wrote"
            found.append(Failure("invalid-output", f"{cmd}: {what} outside its named paths", rel))
            break
    for rel in changed:
        path = ws.work / rel
        if Path(rel).name.endswith(".tmp") and Path(rel).name.startswith("."):
            found.append(Failure("invalid-output", f"{cmd}: left a temporary file", rel))
        elif path.is_file() and not path.is_symlink():
            problem = check_file(path, rel, inp)
            if problem:
                found.append(Failure("invalid-output", f"{cmd}: {problem}", rel))
    if ws.full is not None:
        left = [p.name for p in ws.full.iterdir() if p.name.endswith(".tmp")]
        if left:
            found.append(Failure("fault-unreported", f"{cmd}: temp file left on a full disk"))
    for rel, content in inp.edits.items():
        if rel.startswith("o-") and content in (DEVICE, FIFO):
            mode = (ws.work / rel).lstat().st_mode if (ws.work / rel).exists() else 0
            if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
                found.append(Failure("invalid-output", f"{cmd}: replaced a device or pipe", rel))
        if rel == "o-link.json" and not (ws.work / rel).is_symlink():
            found.append(Failure("invalid-output", f"{cmd}: replaced a symbolic link", rel))
        unasked = rel in ("o-target.txt", "o-existing.json") and "--force" not in inp.argv
        if unasked and (ws.work / rel).read_bytes() != content:
            found.append(Failure("invalid-output", f"{cmd}: replaced a file unasked", rel))
    for stream, text in (("stdout", outcome.out), ("stderr", outcome.err)):
        problem = injection_problem(text)
        if problem:
            found.append(Failure("injection", f"{cmd}: {stream}: {_normal(problem)}", text[-2000:]))
    problem = check_stdout(inp, outcome.out)
    if problem:
        found.append(Failure("invalid-output", f"{cmd}: stdout: {problem}"))
    return found


def judge(
    inp: Input, outcome: Outcome, ws: Workspace, parser: argparse.ArgumentParser
) -> list[Failure]:
    found = judge_process(inp, outcome, ws)
    if not outcome.hung:
        found += judge_files(inp, outcome, ws, parser)
    return found
