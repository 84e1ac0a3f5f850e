"""Call ``ci_bench.commands.cli.main`` in this process: the fuzzer's fast path to the CLI."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import site
import sys
import sysconfig
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from subprocess import CompletedProcess
from unittest import mock

from ci_bench.measure.serve import calls_in_this_process
from tests.conftest import FIXTURES, REPO


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]


def call(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Outcome:
    """Run the CLI with ``args`` in ``cwd``; GitHub variables come only from ``env``."""
    from ci_bench.commands.cli import main

    out, err = io.StringIO(), io.StringIO()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    # worker processes import the kernels as run_cli's subprocesses do: from the repository
    clean["PYTHONPATH"] = os.pathsep.join([str(REPO), str(FIXTURES)])
    previous = Path.cwd()
    with (
        mock.patch.dict(os.environ, {**clean, **(env or {})}, clear=True),
        calls_in_this_process(),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        os.chdir(cwd)
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's --help and usage errors
            code = exc.code if isinstance(exc.code, int) else 2
        finally:
            os.chdir(previous)
    return Outcome(int(code), out.getvalue(), err.getvalue())


def assert_one_line_error(outcome: Outcome, *needles: str) -> None:
    """The promise: exit 2, exactly one line on stderr, naming what was wrong."""
    assert outcome.code == 2, (outcome.code, outcome.err)
    assert len(outcome.lines) == 1, outcome.err
    assert "Traceback" not in outcome.err
    for needle in needles:
        assert needle in outcome.err, (needle, outcome.err)


# -- run_cli's in-process path ----------------------------------------------------------
# ``run_cli`` (tests/conftest.py) runs the CLI here unless the process is the point: a
# fresh interpreter costs ~3 s of imports per call. For the same reason the command's calls
# into kernel code (describe, trace, model, lower: a worker process each in ci-bench) are
# answered here too (``serve.calls_in_this_process``); the rule that they run in
# workers, and what a worker's hang or crash does, is tested with ``process=True``
# (tests/test_kernel_code_in_workers.py). What a process would have given each
# call fresh is given fresh here and put back afterwards: cwd, os.environ, sys.path, the
# user's modules (a kernel, a project's package), jax's config and compilation cache, the
# interpret mode, the warning filters and signal handlers.

# Whether run_cli's in-process calls answer the kernel-code calls here too (above); a test
# of where they run sets it False.
KERNEL_CALLS_HERE = True

# Variables read once per process (jax's backend, the interpreter itself): a call that sets
# one runs in a fresh process, as it would in CI.
PROCESS_ENV = ("JAX_", "XLA_", "TPU_", "CUDA_", "PYTHONHOME", "PYTHONSAFEPATH", "LD_")
# Files Python runs when it starts, from a PYTHONPATH folder: only a new process runs them.
START_UP = ("sitecustomize.py", "usercustomize.py")


def needs_process(given: dict[str, str]) -> bool:
    """A call whose environment only a new interpreter would honour: a variable read once
    per process, or a PYTHONPATH folder with a start-up hook (a test's install emulation)."""
    if any(key.startswith(PROCESS_ENV) for key in given):
        return True
    folders = [Path(p) for p in given.get("PYTHONPATH", "").split(os.pathsep) if p]
    return any((f / name).is_file() for f in folders for name in START_UP) or any(
        f.is_dir() and any(f.glob("*.pth")) for f in folders
    )


_SYSTEM = tuple(
    {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        *site.getsitepackages(),
        site.getusersitepackages(),
        *sysconfig.get_paths().values(),
    }
)


def _user_land(name: str, module: object) -> bool:
    """A module a fresh process would import anew from the project (not Python's, not an
    installed package's, not ci_bench's own): dropped before a call, put back after."""
    if name == "ci_bench" or name.startswith("ci_bench."):
        return False
    origin = getattr(module, "__file__", None)
    if origin is None:
        paths = list(getattr(module, "__path__", None) or [])
        origin = paths[0] if paths else None
    return origin is not None and not str(origin).startswith(_SYSTEM)


def _jax_config() -> dict[str, object] | None:
    if "jax" not in sys.modules:
        return None
    import jax

    return {name: holder.value for name, holder in jax.config._value_holders.items()}


def _restore_jax(before: dict[str, object] | None) -> None:
    if "jax" not in sys.modules:
        return
    import jax
    from jax._src import compilation_cache

    from ci_bench.measure.interpret import reset_interpret_mode

    if before is not None:
        for name, value in before.items():
            holder = jax.config._value_holders.get(name)
            if holder is not None and holder.value != value:
                jax.config.update(name, value)
    compilation_cache.reset_cache()  # the next call's cache folder, not this one's
    reset_interpret_mode()


def _show_on_stderr(message, category, filename, lineno, file=None, line=None) -> None:
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


@contextlib.contextmanager
def _fresh_warnings() -> Iterator[None]:
    """Python's start-up filters, printed to (the captured) stderr, each shown again."""
    with warnings.catch_warnings():
        warnings.resetwarnings()
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning):
            warnings.simplefilter("ignore", category)
        warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
        warnings.simplefilter("ignore", ResourceWarning)
        warnings.showwarning = _show_on_stderr
        yield


@contextlib.contextmanager
def isolated(cwd: Path, env: dict[str, str]) -> Iterator[None]:
    """``cwd`` and exactly ``env`` for one CLI call, the process state put back after it."""
    modules = dict(sys.modules)
    user = {name for name, module in modules.items() if _user_land(name, module)}
    path = list(sys.path)
    jax_before = _jax_config()
    sigterm = signal.getsignal(signal.SIGTERM)
    previous = Path.cwd()
    argv = list(sys.argv)
    for name in user:
        del sys.modules[name]
    # `python -m` puts the cwd first, then PYTHONPATH's entries
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:0] = [str(cwd), *extra]
    try:
        with mock.patch.dict(os.environ, env, clear=True), _fresh_warnings():
            os.chdir(cwd)
            sys.argv = ["ci-bench"]
            yield
    finally:
        os.chdir(previous)
        sys.argv = argv
        sys.path[:] = path
        for name, module in list(sys.modules.items()):
            if name not in modules and _user_land(name, module):
                del sys.modules[name]
        sys.modules.update({name: modules[name] for name in user})
        _restore_jax(jax_before)
        signal.signal(signal.SIGTERM, sigterm)


def _text(raw: io.BytesIO) -> str:
    # subprocess.run(text=True) reads with universal newlines
    return raw.getvalue().decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


def completed(args: Sequence[str], cwd: Path, env: dict[str, str]) -> CompletedProcess[str]:
    """What ``subprocess.run([ci-bench, *args], env=env, text=True)`` would return, run here."""
    from ci_bench.commands.cli import main

    out_raw, err_raw = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_raw, encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(err_raw, encoding="utf-8", write_through=True)
    with (
        isolated(cwd, env),
        calls_in_this_process() if KERNEL_CALLS_HERE else contextlib.nullcontext(),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out.flush()
        err.flush()
    return CompletedProcess(["ci-bench", *args], int(code), _text(out_raw), _text(err_raw))
