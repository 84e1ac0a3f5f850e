"""The fuzz harness: run one input in a fresh workspace and judge everything it did.

Shared by tests/test_fuzz.py (CI: in this process, plus a small sample through real
processes) and benchmarks/fuzz.py (the long run: thousands of real processes). An input
(``tests/harness/fuzz_inputs.Input``, made by ``tests/harness/fuzz_commands.make_input``)
runs against a copy of the seed project; the oracles then check:

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
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.harness.fuzz_inputs import DEVICE, DIR, FIFO, REMOVE, Input
from tests.harness.fuzz_oracles import ESCAPED, Failure, judge
from tests.harness.fuzz_seeds import Seeds

__all__ = ["ESCAPED", "Failure", "Outcome", "Workspace", "attempt", "judge", "tmpfs_available"]

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
            [sys.executable, "-m", "tests.harness.fuzz_entry", *inp.argv],
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
