"""``ci-bench`` as a fresh process that skips the imports: the workflow tests' stand-in venv.

The pipeline tests run the workflows' steps with bash, and every step that calls
``"${CI_BENCH_VENV}/bin/ci-bench"`` used to pay a new interpreter's imports (jax, numpy,
pydantic: about 2 s each, dozens of calls a scenario). Here one server per test worker
imports them once; each call is a fork of it with the caller's argv, environment, working
directory and standard streams (passed over a Unix socket), so the command still runs in
its own process: its own exit code, signals (a segfault is the caller's 139), ``atexit``
handlers, modules imported from the caller's ``sys.path`` only. A call whose environment
only a new interpreter would honour (``JAX_*``, ``XLA_*``, ``PYTHON*``, ...: read once, at
import) runs the real console script instead.

``venv(folder)`` makes the stand-in: ``bin/ci-bench`` is the client, every other entry of
``bin`` links to this interpreter's venv.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

# Read by jax, XLA or the interpreter when a process starts: a fork would keep the
# server's values, so a call that sets one differently gets a real process.
PROCESS_ENV = ("JAX_", "XLA_", "TPU_", "CUDA_", "PYTHON", "LD_", "TF_", "OMP_", "MKL_")
# What importing or starting jax writes into os.environ itself (a process that imported it
# holds them; the server starts without them, as a new interpreter would).
JAX_WRITES = ("TPU_SKIP_MDS_QUERY", "TF_CPP_MIN_LOG_LEVEL")
# What the commands import before they do anything: imported once, by the server.
PRELOAD = (
    "ci_bench.commands.cli",
    "ci_bench.commands.ci",
    "jax",
    "jax.numpy",
    "jax.experimental.pallas",
    "numpy",
    "pydantic",
)
SCRIPT = Path(sys.prefix) / "bin" / "ci-bench"
CLIENT = """\
#!{python} -IS
# ci-bench through the test worker's fork server (tests/harness/forkserver.py).
import json, os, signal, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect({address!r})
data = json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}}).encode()
socket.send_fds(s, [struct.pack("!I", len(data))], [0, 1, 2])
s.sendall(data)
reply = b""
while len(reply) < 4:
    more = s.recv(4 - len(reply))
    if not more:
        sys.exit("ci-bench fork server: no reply")
    reply += more
(status,) = struct.unpack("!i", reply)
if status == -1000:  # the server says: a real process
    os.execv({script!r}, [{script!r}, *sys.argv[1:]])
if status < 0:  # killed by a signal: so is the caller's process
    signal.signal(-status, signal.SIG_DFL)
    os.kill(os.getpid(), -status)
sys.exit(status)
"""
FALLBACK = -1000


def _read(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        more = conn.recv(size - len(data))
        if not more:
            raise EOFError
        data += more
    return data


def _needs_process(env: dict[str, str], started: dict[str, str]) -> bool:
    """Would a new interpreter import with other values than the server did?"""
    keys = {k for k in (*env, *started) if k.startswith(PROCESS_ENV)} - {"PYTHONPATH"}
    return any(env.get(k) != started.get(k) for k in keys)


def _command(request: dict, fds: list[int], base_path: list[str]) -> None:
    """In the grandchild: become the process the caller started, run ci-bench, exit."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.setsid()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [str(SCRIPT.parent), *extra, *base_path]
    sys.argv = [str(SCRIPT), *request["argv"]]
    import random

    import numpy as np

    random.seed()
    np.random.seed()
    code: object = 0
    try:
        from ci_bench.commands.cli import main

        code = main()
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(int(code or 0))


def _serve_one(conn: socket.socket, base_path: list[str], started: dict[str, str]) -> None:
    """In a child of the server: fork the command, wait for it, tell the client."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    header, fds, _, _ = socket.recv_fds(conn, 4, 3)
    (size,) = struct.unpack("!I", header)
    request = json.loads(_read(conn, size))
    if _needs_process(request["env"], started):
        conn.sendall(struct.pack("!i", FALLBACK))
        os._exit(0)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _command(request, fds, base_path)
    for fd in fds:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    conn.sendall(struct.pack("!i", code))
    os._exit(0)


def serve(address: str) -> None:
    """The server: import once, then one forked child per connection."""
    import importlib

    started = dict(os.environ)  # what the imports below see
    for name in PRELOAD:
        importlib.import_module(name)
    base_path = list(sys.path)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reap themselves
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            listener.close()
            try:
                _serve_one(conn, base_path, started)
            finally:
                os._exit(1)
        conn.close()


_SERVERS: dict[tuple[tuple[str, str], ...], Path] = {}


def _start(given: dict[str, str]) -> Path:
    """This process's server for the import-time variables ``given`` (started once, stopped
    when the process ends): the folder of its socket."""
    key = tuple(sorted(given.items()))
    if key not in _SERVERS:
        folder = Path(tempfile.mkdtemp(prefix="ci-bench-fork-"))
        address = str(folder / "socket")
        dropped = ("PYTHONPATH", "GITHUB_", *JAX_WRITES)
        env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)} | given
        server = subprocess.Popen(
            [sys.executable, "-P", __file__, address],
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None
        if server.stdout.readline().strip() != "ready":
            raise RuntimeError("the ci-bench fork server did not start")

        def stop() -> None:
            server.terminate()
            server.wait(timeout=30)

        atexit.register(stop)
        _SERVERS[key] = folder
    return _SERVERS[key]


def venv(folder: Path, env: dict[str, str] | None = None) -> Path:
    """A stand-in for the test's venv: ``bin/ci-bench`` forks from a server that imported
    with ``env`` (the jobs' own ``JAX_PLATFORMS``, say), every other entry of ``bin`` is
    this venv's own."""
    address = str(_start(env or {}) / "socket")
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True)
    for entry in (Path(sys.prefix) / "bin").iterdir():
        if entry.name != "ci-bench":
            (bin_dir / entry.name).symlink_to(entry)
    client = bin_dir / "ci-bench"
    client.write_text(CLIENT.format(python=sys.executable, address=address, script=str(SCRIPT)))
    client.chmod(0o755)
    return folder


if __name__ == "__main__":
    serve(sys.argv[1])
