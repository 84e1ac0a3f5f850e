"""The fuzz harness: run one input in a fresh workspace and judge everything it did.

Shared by tests/test_fuzz.py (CI: in this process, plus a small sample through real
processes) and benchmarks/fuzz.py (the long run: thousands of real processes). An input
(``tests/fuzz_inputs.Input``, made by ``tests/fuzz_commands.make_input``) runs against a copy
of the seed project; the oracles then check:

- crash: exit 5, a traceback, a signal, an undocumented exit code, an exception out of main;
- hang: still running after the time limit;
- silent pass: exit 0 on an input classified broken up front;
- false refusal: exit 2 on an input classified valid;
- invalid output: exit 2 without exactly one error line; a written file that is not strict
  JSON or not readable back by ci-bench's own readers; markdown or annotations carrying
  markup, links or mentions from input fields; a site link that is not http(s); anything
  written outside the paths the command was given; a refused target changed anyway;
- fault unreported: a full disk that is not a one-line "no space" error, temp files left.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fuzz_commands import REPLACEABLE, options, output_kind
from tests.fuzz_inputs import DEVICE, DIR, FIFO, REMOVE, Input
from tests.fuzz_seeds import Seeds

DOCUMENTED_EXITS = {0, 1, 2, 3, 4, 130, 143}
ESCAPED = 120  # tests/fuzz_entry.py, benchmarks/fuzz.py: an exception escaped main
ERROR_LINE = re.compile(r"^ci-bench( [\w-]+)?: error: \S")
FULL_DISK_BYTES = 64 * 1024


@dataclass
class Outcome:
    code: int | None  # None: killed (signal) or hung
    out: str
    err: str
    signal: int | None = None
    hung: bool = False
    escaped: BaseException | None = None  # in-process: an exception out of main
    seconds: float = 0.0


@dataclass
class Failure:
    kind: str  # crash, hang, silent-pass, false-refusal, invalid-output, fault-unreported
    signature: str  # what makes it distinct (command and cause, no input details)
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.kind}: {self.signature}"


# --- the workspace ---------------------------------------------------------------------------


def tmpfs_available() -> str | None:
    """None if a small tmpfs can be mounted here (root, CAP_SYS_ADMIN), else why not."""
    if os.geteuid() != 0:
        return "not root: no tmpfs for the full-disk fault"
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", folder],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            return f"mount -t tmpfs refused: {done.stderr.strip()[:120]}"
        subprocess.run(["umount", folder], check=False)
    return None


@dataclass
class Workspace:
    root: Path
    work: Path
    tmp: Path
    full: Path | None = None
    before: dict[str, tuple] = field(default_factory=dict)

    @classmethod
    def create(cls, seeds: Seeds, inp: Input, parent: Path | None = None) -> Workspace:
        root = Path(tempfile.mkdtemp(prefix="fz-", dir=parent))
        work, tmp = root / "work", root / "tmp"
        shutil.copytree(seeds.project, work, symlinks=True)
        tmp.mkdir()
        (root / "home").mkdir()
        ws = cls(root, work, tmp)
        for rel, content in inp.edits.items():
            ws._place(work / rel, content)
        if inp.fault == "disk-full":
            ws._mount_full()
        ws.before = ws.snapshot()
        return ws

    def _place(self, path: Path, content: Any) -> None:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        path.parent.mkdir(parents=True, exist_ok=True)
        if content == DIR:
            path.mkdir()
        elif content == FIFO:
            os.mkfifo(path)
        elif content == DEVICE:  # a /dev/null twin inside the workspace (root), else a FIFO
            try:
                os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
            except OSError:
                os.mkfifo(path)
        elif isinstance(content, str) and content.startswith("<symlink:"):
            path.symlink_to(content[len("<symlink:") : -1])
        elif isinstance(content, str) and content.startswith("<copy:"):
            source = self.work / content[len("<copy:") : -1]
            if source.is_dir():
                shutil.copytree(source, path)
            else:
                shutil.copy(source, path)
        elif content != REMOVE:
            path.write_bytes(content)

    def _mount_full(self) -> None:
        full = self.work / "full"
        full.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={FULL_DISK_BYTES}", "tmpfs", str(full)],
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError("tmpfs could not be mounted")
        self.full = full
        with contextlib.suppress(OSError), (full / ".filler").open("wb", buffering=0) as handle:
            while True:  # until the disk is full
                handle.write(b"\0" * 4096)
                handle.flush()

    def env(self, seeds: Seeds, inp: Input) -> dict[str, str]:
        return {
            **seeds.env(),
            "HOME": str(self.root / "home"),
            "TMPDIR": str(self.tmp),
            "RUNNER_TEMP": str(self.tmp),
            **inp.env,
        }

    def snapshot(self) -> dict[str, tuple]:
        found: dict[str, tuple] = {}
        for folder, dirs, files in os.walk(self.work):
            rel_folder = Path(folder).relative_to(self.work)
            dirs[:] = [d for d in dirs if not (rel_folder == Path() and d in (".git", "full"))]
            for name in [*dirs, *files]:
                path = Path(folder) / name
                info = path.lstat()
                found[str(rel_folder / name)] = (
                    stat.S_IFMT(info.st_mode),
                    info.st_size,
                    info.st_mtime_ns,
                    info.st_ino,
                )
        return found

    def remove(self) -> None:
        if self.full is not None:
            subprocess.run(["umount", "-l", str(self.full)], check=False)
        shutil.rmtree(self.root, ignore_errors=True)


# --- running ---------------------------------------------------------------------------------


class FuzzTimeout(BaseException):
    """Raised in this process when an in-process input runs past its limit."""


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    def fire(signum: int, frame: Any) -> None:
        raise FuzzTimeout

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_inprocess(inp: Input, ws: Workspace, env: dict[str, str], timeout: float) -> Outcome:
    """``main()`` in this process: fast; real exit codes are the other modes' job."""
    import io
    from unittest import mock

    from ci_bench.commands.cli import main

    out, err = io.StringIO(), io.StringIO()
    previous = Path.cwd()
    started = time.perf_counter()
    outcome = Outcome(None, "", "")
    with (
        mock.patch.dict(os.environ, env, clear=True),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        os.chdir(ws.work)
        try:
            with _alarm(timeout):
                outcome.code = main(list(inp.argv[:]))
        except SystemExit as exc:
            outcome.code = exc.code if isinstance(exc.code, int) else 2
        except FuzzTimeout:
            outcome.hung = True
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            outcome.escaped = exc
        finally:
            os.chdir(previous)
    outcome.out, outcome.err = out.getvalue(), err.getvalue()
    outcome.seconds = time.perf_counter() - started
    return outcome


def run_exec(inp: Input, ws: Workspace, env: dict[str, str], timeout: float) -> Outcome:
    """A fresh interpreter, as a user's shell runs ``ci-bench``."""
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tests.fuzz_entry", *inp.argv],
            cwd=ws.work,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        return Outcome(None, _text(exc.stdout), _text(exc.stderr), hung=True, seconds=timeout)
    code = done.returncode
    outcome = Outcome(code if code >= 0 else None, _text(done.stdout), _text(done.stderr))
    outcome.signal = -code if code < 0 else None
    outcome.seconds = time.perf_counter() - started
    return outcome


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", "backslashreplace")


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
    from tests.fuzz_outputs import check_file, check_stdout

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


def attempt(
    seeds: Seeds,
    inp: Input,
    parser: argparse.ArgumentParser,
    *,
    mode: str = "inprocess",
    timeout: float = 60.0,
    parent: Path | None = None,
) -> tuple[list[Failure], Outcome]:
    """One input in a fresh workspace, judged."""
    ws = Workspace.create(seeds, inp, parent)
    try:
        env = ws.env(seeds, inp)
        run = run_inprocess if mode == "inprocess" else run_exec
        outcome = run(inp, ws, env, timeout)
        return judge(inp, outcome, ws, parser), outcome
    finally:
        ws.remove()


def dump_failure(failure: Failure, inp: Input) -> dict[str, Any]:
    return {
        "kind": failure.kind,
        "signature": failure.signature,
        "argv": inp.argv,
        "env": inp.env,
        "notes": inp.notes,
        "detail": failure.detail[-800:],
    }


def as_json(value: Any) -> str:
    return json.dumps(value, indent=2, default=str)
