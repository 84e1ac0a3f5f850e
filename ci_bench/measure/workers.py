"""Cases run in worker processes; the parent owns the results file.

A kernel that hangs, segfaults or calls ``os._exit`` takes down only its worker: the case
becomes an ``error`` naming the time limit, the signal or the exit code (with the last
lines the worker wrote to stderr), a fresh worker takes its place, and the run goes on.
The persistent compilation cache keeps a restart cheap. With several workers each is
pinned to one accelerator and all share one queue of cases.

Protocol: the worker reads one JSON line per job on stdin and answers one JSON line on its
original stdout (fd 1 is pointed at stderr, so a kernel's prints cannot corrupt it). A job
measures one case of the head's kernels, or (A/B) the head's and the base's kernels of one
case interleaved round by round on the same inputs: the base's modules are imported from
its checkout (``base_root``) beside the head's, so a pair has the same time limit, crash
isolation and pinning as any case. The worker's side is ``measure.serve``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ci_bench.contract.spec import Case
from ci_bench.defaults import CASE_TIMEOUT_S
from ci_bench.measure.kernel_process import (
    EXIT_GRACE,
    PARENT_ENV,
    START_TIMEOUT,
    WORKER_CODE,
    Adopted,
    death,
)
from ci_bench.measure.kernel_process import tail as _tail
from ci_bench.schema import CaseResult, DeviceFingerprint
from ci_bench.schema.platforms import platform_of

DEFAULT_CASE_TIMEOUT = CASE_TIMEOUT_S
# A worker stopped mid-case (a cancelled job) gets this long to exit on SIGTERM before it is
# killed: a clean exit lets the accelerator's runtime release the chip for the next job.
STOP_GRACE = 10.0


class WorkerError(RuntimeError):
    """Workers cannot start at all (the run cannot go on)."""


@dataclass(frozen=True)
class WorkerSetup:
    """Everything a worker needs to measure a case, as plain JSON-able values."""

    modules: list[str]
    root: str | None
    settings: dict[str, Any]
    device: dict[str, Any]
    peak_tflops: float | None = None
    peak_gbps: float | None = None
    cache_dir: str | None = None
    # A/B: the base's checkout and kernel modules, loaded beside the head's.
    base_root: str | None = None
    base_modules: list[str] = dataclasses.field(default_factory=list)
    # The two checkouts' top levels: every module inside the head's comes from the base's.
    base_tree: str | None = None
    head_tree: str | None = None


@dataclass(frozen=True)
class Job:
    """One case to measure: the head alone, or head and base as a pair (A/B)."""

    case: Case
    pair: bool = False
    # Seeds the shuffled round order of a pair (per case, so any worker gives the same).
    order_seed: str | None = None


def pin_env(platform: str, index: int) -> dict[str, str]:
    """Environment that gives a worker exactly one local accelerator (the platform table's
    ``worker_env``: TPU: libtpu's non-communicating single-chip processes, one chip each,
    own mesh port; GPU: CUDA_VISIBLE_DEVICES). CPU workers share the host and need nothing.
    """
    entry = platform_of(platform)
    port = str(entry.port_base + index)
    return {key: value.format(index=index, port=port) for key, value in entry.worker_env}


def default_workers(device: DeviceFingerprint) -> int:
    """One worker per local accelerator; one on CPU (cases would share the same cores)."""
    return max(1, device.device_count) if platform_of(device.platform).one_worker_per_device else 1


# Device nodes of local accelerators: TPU (v4+ accel, older vfio) and NVIDIA GPUs.
ACCELERATOR_NODES = ("accel*", "vfio/[0-9]*", "nvidia[0-9]*")


def accelerator_present(env: Mapping[str, str], dev: Path = Path("/dev")) -> bool:
    """Could jax in this process take an accelerator a worker needs? Not on a CPU-only
    host, nor when ``JAX_PLATFORMS=cpu``; then the fingerprint is read in-process."""
    if env.get("JAX_PLATFORMS", "").strip().lower() == "cpu":
        return False
    return any(any(dev.glob(pattern)) for pattern in ACCELERATOR_NODES)


# A worker that finds the chip held by another process (the previous job's, still exiting)
# is started again every BUSY_PAUSE seconds for at most BUSY_WAIT, then the run fails
# naming the cause.
BUSY_WAIT = 60.0
BUSY_PAUSE = 2.0


def chip_busy(stderr: str) -> bool:
    """Whether a process failed because another one holds the accelerator (libtpu:
    "open(/dev/vfio/1): Device or resource busy")."""
    return "device or resource busy" in stderr.lower()


def busy_message(waited: float, stderr: str) -> str:
    return (
        f"the accelerator stayed busy for {waited:g} s: another process holds it (a job "
        f"still running or stuck on this runner?): {_tail(stderr)}"
    )


def probe(
    env: Mapping[str, str],
    timeout: float = START_TIMEOUT,
    busy_wait: float = BUSY_WAIT,
    code: str = (
        "import sys; from ci_bench.measure.devices import fingerprint; "
        "sys.stdout.write(fingerprint().model_dump_json())"
    ),
) -> DeviceFingerprint:
    """The host's device fingerprint, read in a child so this process never holds a TPU;
    a busy chip is asked again for up to ``busy_wait`` seconds."""
    deadline = time.monotonic() + busy_wait
    while True:
        try:
            done = subprocess.run(
                [sys.executable, "-c", code],
                env=dict(env),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise WorkerError(f"reading the device fingerprint took over {timeout:g} s") from None
        if done.returncode == 0:
            return DeviceFingerprint.model_validate_json(done.stdout)
        if not chip_busy(done.stderr):
            raise WorkerError(f"reading the device fingerprint failed: {_tail(done.stderr)}")
        if time.monotonic() >= deadline:
            raise WorkerError(
                f"reading the device fingerprint: {busy_message(busy_wait, done.stderr)}"
            )
        time.sleep(BUSY_PAUSE)


@dataclass
class _Slot:
    """One worker process and the job it runs."""

    index: int
    pin: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    stderr: IO[bytes] | None = None
    buffer: bytes = b""
    ready: bool = False
    job: tuple[int, Job] | None = None
    deadline: float = 0.0
    err_offset: int = 0


# A job's results: [head] or, for a pair, [head, base].
Failed = Callable[[Job, str], list[CaseResult]]
Done = Callable[[int, list[CaseResult]], None]
Started = Callable[[int], None]


class Pool:
    """Worker processes sharing one queue of jobs, with a time limit per job."""

    def __init__(
        self,
        setup: WorkerSetup,
        pins: Sequence[dict[str, str]],
        *,
        case_timeout: float = DEFAULT_CASE_TIMEOUT,
        env: Mapping[str, str] | None = None,
        adopt: Adopted | None = None,
        busy_wait: float = BUSY_WAIT,
        worker_code: str = WORKER_CODE,
    ) -> None:
        self.setup = setup
        self.busy_wait = busy_wait
        self.busy_since: float | None = None  # when a worker first found the chip busy
        self.worker_code = worker_code
        # The kernel process that described the kernels: the first worker, already warm.
        self.adopt = adopt
        self.case_timeout = case_timeout
        self.env = dict(os.environ if env is None else env)
        self.slots = [_Slot(i, dict(p)) for i, p in enumerate(pins)]
        self.selector = selectors.DefaultSelector()

    # -- processes ---------------------------------------------------------------------
    def _spawn(self, slot: _Slot) -> None:
        if self.adopt is not None and self.adopt.proc.poll() is None:
            slot.proc, slot.stderr = self.adopt.proc, self.adopt.stderr
        else:
            slot.stderr = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the worker)
            slot.proc = subprocess.Popen(
                [sys.executable, "-c", self.worker_code],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=slot.stderr,
                env={**self.env, **slot.pin, PARENT_ENV: str(os.getpid())},
                start_new_session=True,  # its own process group: a kill takes its children too
            )
        self._drop_adopted()
        assert slot.proc.stdin is not None
        assert slot.proc.stdout is not None
        os.set_blocking(slot.proc.stdout.fileno(), False)
        self.selector.register(slot.proc.stdout, selectors.EVENT_READ, slot)
        slot.buffer, slot.ready, slot.job = b"", False, None
        slot.deadline = time.monotonic() + max(START_TIMEOUT, self.case_timeout)
        self._send(slot, {"setup": dataclasses.asdict(self.setup)})

    def _send(self, slot: _Slot, message: dict[str, Any]) -> None:
        assert slot.proc is not None
        assert slot.proc.stdin is not None
        try:
            slot.proc.stdin.write(json.dumps(message).encode() + b"\n")
            slot.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died; the EOF on its stdout says how

    def _drop_adopted(self) -> None:
        """The adopted process is taken (or gone): never adopted twice, never left."""
        adopted, self.adopt = self.adopt, None
        if adopted is not None and adopted.proc.poll() is not None:
            adopted.stderr.close()

    def _stop(self, slot: _Slot, kill: bool, grace: float = 0.0) -> int:
        proc = slot.proc
        assert proc is not None
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(proc.stdout)  # type: ignore[arg-type]
        if grace:  # its pipe closed: its own exit status, unless it lingers
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace)
        if kill and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]
        code = proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]
        slot.proc = None
        return code

    def _stderr_since(self, slot: _Slot) -> str:
        assert slot.stderr is not None
        slot.stderr.seek(slot.err_offset)
        text = slot.stderr.read().decode(errors="replace")
        slot.stderr.close()
        return text

    def close(self) -> None:
        """Every worker stopped and waited for, so the accelerator is free when this returns:
        an idle one is asked to exit; a busy one (an interrupt, a cancelled job) gets
        SIGTERM and ``STOP_GRACE`` seconds to exit cleanly (its handler unwinds, so the
        runtime releases the chip), then SIGKILL, with its whole process group."""
        if self.adopt is not None:  # never taken: stopped like any idle worker
            slot = _Slot(-1, {}, self.adopt.proc, self.adopt.stderr)
            self.adopt = None
            self.slots.append(slot)
        live = [s for s in self.slots if s.proc is not None]
        for slot in live:
            if slot.job is None:
                self._send(slot, {"exit": True})
            else:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(slot.proc.pid, signal.SIGTERM)  # type: ignore[union-attr]
        deadline = time.monotonic() + STOP_GRACE
        for slot in live:
            with contextlib.suppress(subprocess.TimeoutExpired):
                slot.proc.wait(timeout=max(0.0, deadline - time.monotonic()))  # type: ignore[union-attr]
            self._stop(slot, kill=True)
            if slot.stderr is not None:
                slot.stderr.close()
        self.selector.close()

    # -- the queue ---------------------------------------------------------------------
    def run(self, jobs: Sequence[Job], failed: Failed, done: Done, started: Started) -> None:
        """Measure every job; ``done(i, results)`` as each finishes (in any order)."""
        queue = deque(enumerate(jobs))
        if not queue:
            return
        while queue or any(s.job is not None for s in self.slots):
            for slot in self.slots:
                if slot.proc is None and queue:
                    self._spawn(slot)
                if slot.ready and slot.job is None and queue:
                    i, job = queue.popleft()
                    slot.job = (i, job)
                    assert slot.stderr is not None
                    slot.err_offset = slot.stderr.seek(0, os.SEEK_END)
                    slot.deadline = time.monotonic() + self.case_timeout
                    started(i)
                    self._send(slot, _job_json(job))
            live = [s for s in self.slots if s.proc is not None and (s.job or not s.ready)]
            if not live:
                continue
            wait = max(0.0, min(s.deadline for s in live) - time.monotonic())
            for key, _ in self.selector.select(timeout=wait):
                self._read(key.data, failed, done)
            now = time.monotonic()
            for slot in live:
                if slot.proc is not None and now >= slot.deadline:
                    self._expire(slot, failed, done)

    def _read(self, slot: _Slot, failed: Failed, done: Done) -> None:
        assert slot.proc is not None
        assert slot.proc.stdout is not None
        try:
            chunk = os.read(slot.proc.stdout.fileno(), 1 << 20)
        except BlockingIOError:
            return
        if not chunk:
            self._died(slot, failed, done)
            return
        slot.buffer += chunk
        while b"\n" in slot.buffer:
            line, slot.buffer = slot.buffer.split(b"\n", 1)
            message = json.loads(line)
            if "ready" in message:
                slot.ready = True
            elif "results" in message and slot.job is not None:
                i, _ = slot.job
                slot.job = None
                done(i, [CaseResult.model_validate(r) for r in message["results"]])

    def _died(self, slot: _Slot, failed: Failed, done: Done) -> None:
        code = self._stop(slot, kill=True, grace=EXIT_GRACE)
        text = self._stderr_since(slot)
        if slot.job is None:
            if chip_busy(text):  # the previous job's process still holds the chip
                now = time.monotonic()
                self.busy_since = self.busy_since or now
                if now - self.busy_since < self.busy_wait:
                    time.sleep(BUSY_PAUSE)
                    return  # the queue's loop starts it again
                raise WorkerError(busy_message(self.busy_wait, text))
            raise WorkerError(f"a worker {death(code)} while starting: {_tail(text)}")
        i, job = slot.job
        slot.job = None
        done(i, failed(job, f"worker {death(code)}: {_tail(text)}"))

    def _expire(self, slot: _Slot, failed: Failed, done: Done) -> None:
        self._stop(slot, kill=True)
        text = self._stderr_since(slot)
        if slot.job is None:
            raise WorkerError(f"a worker did not start within {START_TIMEOUT:g} s: {_tail(text)}")
        i, job = slot.job
        slot.job = None
        done(i, failed(job, f"timed out after {self.case_timeout:g} s"))


def _job_json(job: Job) -> dict[str, Any]:
    case = job.case
    raw = {
        "kernel": case.kernel,
        "params": dict(case.params),
        "dtype": case.dtype,
        "mode": case.mode,
    }
    return {"case": raw, "pair": job.pair, "order_seed": job.order_seed}
