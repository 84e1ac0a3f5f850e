"""The process where kernel code runs before (and instead of) the measuring pool.

The orchestrating process never imports or executes a kernel module of either side
(docs/ARCHITECTURE.md, "Kernel code only in workers"): describing the SPECs, the A/B's
source trace, the cost model and the lowering check are calls into a worker process, each
under a time limit. A call that hangs, crashes or errors is a ``KernelCodeError`` naming
what was being done (imported, traced, modelled, lowered), the cause (the time limit, the
signal or exit code) and the last lines the process wrote; the process group is killed
and waited for, so nothing outlives the call. A measuring pool adopts the process once it
has described the kernels, so a run starts no process it did not need.

Protocol (``measure.serve``): ``{"call": "module:function", "args": <pickle, base64>}``
answered by ``{"answer": <JSON>}`` or ``{"error": "one line", "exit": code}``. Arguments go
one way only, from this process to its own child; answers come back as JSON.
"""

from __future__ import annotations

import base64
import contextlib
import copyreg
import json
import os
import pickle
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import IO, Any

from ci_bench.errors import CiBenchError, ExitCode

WORKER_CODE = "from ci_bench.measure.serve import serve; serve()"
# The pid a worker's parent had when it started the worker: a worker whose parent is
# already gone by the time it asks to die with it exits at once.
PARENT_ENV = "CI_BENCH_WORKER_PARENT"
# Importing ci-bench and jax in a fresh process; a worker not answering by then is broken.
START_TIMEOUT = 300.0
# A process whose pipe closed gets this long to exit by itself before it is killed, so its
# own exit status (a libtpu error's code, not our SIGKILL) is what gets reported.
EXIT_GRACE = 5.0


def _proxy(items: dict[str, Any]) -> MappingProxyType[str, Any]:
    return MappingProxyType(items)


copyreg.pickle(MappingProxyType, lambda m: (_proxy, (dict(m),)))  # Case params, SPEC tables


def pack(args: tuple[Any, ...]) -> str:
    return base64.b64encode(pickle.dumps(args)).decode()


def unpack(text: str) -> tuple[Any, ...]:
    return pickle.loads(base64.b64decode(text))


def death(returncode: int) -> str:
    """How a process ended, in words: ``killed by signal SIGSEGV``, ``exited with code 3``."""
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


def tail(text: str, lines: int = 4) -> str:
    """The last lines a dead process wrote; a fatal error's headline first when there is one."""
    rows = [r.strip() for r in text.splitlines() if r.strip()]
    fatal = next((i for i, r in enumerate(rows) if r.startswith("Fatal Python error")), None)
    if fatal is not None:  # faulthandler: the error, then the innermost frame
        frame = next((r for r in rows[fatal:] if r.startswith("File ")), None)
        picked = [rows[fatal], *([frame] if frame else [])]
    else:
        picked = rows[-lines:]
    return " | ".join(picked) or "(no stderr)"


class KernelCodeError(CiBenchError):
    """Kernel code hung, crashed or raised in its worker: what, doing what, and why.

    ``side`` is filled in by the caller that knows it ("the merge base's", "the head's");
    ``how`` is ``hung``, ``crashed`` or ``failed``."""

    exit_code = ExitCode.NOTHING_MEASURED

    def __init__(self, what: str, doing: str, how: str, cause: str, side: str = "") -> None:
        self.what, self.doing, self.how, self.cause, self.side = what, doing, how, cause, side
        super().__init__(self.sentence())

    def sentence(self) -> str:
        who = f"{self.side} {self.what}" if self.side else self.what
        return f"{who} {self.how} while {self.doing} ({self.cause})"

    def on(self, side: str) -> KernelCodeError:
        """The same failure said to be ``side``'s."""
        failed = KernelCodeError(self.what, self.doing, self.how, self.cause, side)
        failed.exit_code = self.exit_code
        return failed


def ready() -> bool:
    """A worker's first call: what every call needs, imported (jax, the SPEC contract)."""
    import jax  # noqa: F401

    import ci_bench.contract.registry  # noqa: F401

    return True


def kernel_env(env: Mapping[str, str], pin: Mapping[str, str] | None) -> dict[str, str]:
    """The worker's environment: pinned to its accelerator when it will measure, else told
    to use the CPU alone, so a process that only describes or traces never takes a chip."""
    if pin is None:
        return {**env, "JAX_PLATFORMS": "cpu"}
    return {**env, **pin}


_LIVE: set[KernelProcess] = set()
# Set by a harness that runs the whole command line inside its own process (this project's
# test suite, through ``serve.calls_in_this_process``), never by ci-bench: what answers the
# calls here instead of a worker.
_ANSWER_HERE: list[Callable[[dict[str, Any]], dict[str, Any]] | None] = [None]


@contextlib.contextmanager
def answered_by(answer: Callable[[dict[str, Any]], dict[str, Any]]) -> Iterator[None]:
    """For the duration, kernel processes made here answer their calls with ``answer`` in
    this process (``serve.calls_in_this_process`` says when and why)."""
    before = _ANSWER_HERE[0]
    _ANSWER_HERE[0] = answer
    try:
        yield
    finally:
        _ANSWER_HERE[0] = before


@dataclass
class Adopted:
    """A live worker handed to the measuring pool (it sends the setup next)."""

    proc: subprocess.Popen[bytes]
    stderr: IO[bytes]


class KernelProcess:
    """A worker process asked one call at a time, each under ``timeout`` seconds; started
    on the first call, and again on the next call after a failure stopped it."""

    def __init__(
        self, env: Mapping[str, str], timeout: float, pin: Mapping[str, str] | None = None
    ) -> None:
        self.timeout = timeout
        self.env = kernel_env(env, pin)
        self.here = _ANSWER_HERE[0]
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr: IO[bytes] | None = None
        self.started = False
        self._buffer = b""

    def _spawn(self) -> subprocess.Popen[bytes]:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives with the process)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER_CODE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env={**self.env, PARENT_ENV: str(os.getpid())},
            start_new_session=True,  # its own process group: a kill takes its children too
        )
        self.started, self._buffer = False, b""
        _LIVE.add(self)
        # Python, ci-bench and jax imported first, under the start limit: the calls that
        # follow (a kernel module's import) get the case limit alone.
        self.call(f"{__name__}:ready", what="worker process", doing="starting")
        return self.proc

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def call(self, function: str, *args: Any, what: str, doing: str) -> Any:
        """``function(*args)`` in the worker; its JSON-able answer. ``what`` and ``doing``
        name it in a failure ("kernel module kernels.matmul", "imported")."""
        if self.here is not None:
            return self._answered(self._answer_here(function, args, what, doing), what, doing)
        if self.proc is None:
            self._spawn()
        assert self.stderr is not None
        offset = self.stderr.seek(0, os.SEEK_END)
        limit = self.timeout if self.started else max(START_TIMEOUT, self.timeout)
        self._send({"call": function, "args": pack(args)})
        message = self._receive(time.monotonic() + limit)
        if message is None:
            self.close(kill=True)
            cause = f"timed out after {self.timeout:g} s"
            raise KernelCodeError(what, doing, "hung", cause)
        if "died" in message:
            cause = f"{message['died']}: {tail(self._stderr_from(offset))}"
            self.close(kill=True)
            raise KernelCodeError(what, doing, "crashed", cause)
        self.started = True
        return self._answered(message, what, doing)

    @staticmethod
    def _answered(message: dict[str, Any], what: str, doing: str) -> Any:
        if "error" in message:
            failed = KernelCodeError(what, doing, "failed", message["error"])
            failed.exit_code = ExitCode(message.get("exit", ExitCode.USAGE))
            raise failed
        return message["answer"]

    def _answer_here(self, function: str, args: tuple[Any, ...], what: str, doing: str) -> Any:
        """The call answered in this process (``answered_by``), encoded and decoded as
        through the pipe; a kernel's ``sys.exit`` is a worker's exit."""
        assert self.here is not None
        try:
            message = self.here({"call": function, "args": pack(args)})
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
            raise KernelCodeError(what, doing, "crashed", death(code)) from None
        return json.loads(json.dumps(message))

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None
        assert self.proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, OSError):  # it died: its EOF says how
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()

    def _receive(self, deadline: float) -> dict[str, Any] | None:
        """The next answer; ``{"died": how}`` at EOF; None past the deadline."""
        assert self.proc is not None
        assert self.proc.stdout is not None
        out = self.proc.stdout
        with selectors.DefaultSelector() as selector:
            selector.register(out, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(timeout=left):
                    return None
                chunk = os.read(out.fileno(), 1 << 20)
                if not chunk:
                    return {"died": death(self._reap())}
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def _reap(self) -> int:
        """The exit status of a process whose pipe closed, killed if it lingers."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=EXIT_GRACE)
        except subprocess.TimeoutExpired:
            self._kill()
            return self.proc.wait()

    def _kill(self) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def _stderr_from(self, offset: int) -> str:
        assert self.stderr is not None
        self.stderr.seek(offset)
        return self.stderr.read().decode(errors="replace")

    def adopt(self) -> Adopted | None:
        """Hand the live process to a measuring pool (None when it is gone)."""
        _LIVE.discard(self)
        if not self.alive or self._buffer:
            self.close(kill=True)
            return None
        assert self.proc is not None
        assert self.stderr is not None
        adopted = Adopted(self.proc, self.stderr)
        self.proc, self.stderr = None, None
        return adopted

    def close(self, *, kill: bool = False) -> None:
        """Stop the process (asked to exit, else killed) and wait for its whole group."""
        _LIVE.discard(self)
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if not kill and proc.poll() is None:
            with contextlib.suppress(BrokenPipeError, OSError):
                proc.stdin.write(b'{"exit": true}\n')  # type: ignore[union-attr]
                proc.stdin.flush()  # type: ignore[union-attr]
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=EXIT_GRACE)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # the group: what the kernel started too
        proc.wait()
        for stream in (proc.stdin, proc.stdout, self.stderr):
            with contextlib.suppress(OSError, AttributeError):
                stream.close()  # type: ignore[union-attr]
        self.stderr = None

    def __enter__(self) -> KernelProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def close_all() -> None:
    """Every kernel process this process started and still holds, stopped (the command
    line's last step, whatever ended the command)."""
    for process in list(_LIVE):
        process.close(kill=True)
    side = sys.modules.get("ci_bench.measure.kernel_side")
    if _ANSWER_HERE[0] is not None and side is not None:  # the next command loads anew
        side.forget_bases()
