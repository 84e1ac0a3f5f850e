"""SIGTERM and SIGINT as exceptions the command line unwinds on, never lost, never a crash.

A cancelled CI job sends SIGTERM; Ctrl-C sends SIGINT. Both become exceptions in the main
thread, so what was measured stays saved and the exit is 143 / 130. Two places would lose
them or turn them into a crash:

- an exception raised inside a garbage-collection callback or a ``__del__`` (jax runs
  some) is printed as "Exception ignored in ..." and dropped, and the run went on
  measuring: the unraisable hook has the same signal sent again a moment later, so it is
  raised in ordinary code;
- an exception raised while a native extension is initialising (``import jax``: jaxlib's
  C++ start-up) ends in a C++ terminate (SIGABRT): while such an import is under way the
  signal is sent again a moment later, for at most ``DEFER_LIMIT`` seconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

# Packages whose import runs native start-up code an exception must not cross.
NATIVE = ("jax", "jaxlib", "numpy", "scipy", "ml_dtypes")
DEFER_S = 0.1
DEFER_LIMIT = 10.0


class Terminated(KeyboardInterrupt):
    """SIGTERM (a cancelled CI job) unwinds like Ctrl-C: what was measured stays saved."""


_FIRST_DEFERRED: list[float | None] = [None]
# The timers that send a put-off signal again (a native import, a finaliser): cancelled
# when the command ends, so none fires once the handlers are put back (a default-action
# kill); a command that ended first still ends as the signal asks (``_RECEIVED``).
_TIMERS: list[threading.Timer] = []
# The signal this command got, raised or not: code that turned the exception into its own
# (pydantic-core, building a validator while a module is imported, makes it a SchemaError;
# a validation error, an error exit) or swallowed it must still end as the signal asks.
_RECEIVED: list[int | None] = [None]


def received() -> int | None:
    """SIGTERM or SIGINT, if this command got one."""
    return _RECEIVED[0]


def native_import_under_way() -> bool:
    """A native package (``NATIVE``) is being imported right now."""
    for name, module in list(sys.modules.items()):
        if name.split(".", 1)[0] in NATIVE:
            spec = getattr(module, "__spec__", None)
            if spec is not None and getattr(spec, "_initializing", False):
                return True
    return False


def _again_later(signum: int) -> None:
    timer = threading.Timer(DEFER_S, os.kill, (os.getpid(), signum))
    timer.daemon = True
    _TIMERS.append(timer)
    timer.start()


def _raise(signum: int) -> None:
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


def _handler(signum: int, frame: FrameType | None) -> None:
    _RECEIVED[0] = _RECEIVED[0] or signum
    now = time.monotonic()
    if native_import_under_way():
        first = _FIRST_DEFERRED[0] = _FIRST_DEFERRED[0] or now
        if now - first < DEFER_LIMIT:
            _again_later(signum)  # raised once the import is done
            return
    _FIRST_DEFERRED[0] = None
    _raise(signum)


def _unraisable(previous: Any) -> Any:
    def hook(unraisable: Any) -> None:
        exc = unraisable.exc_value
        if isinstance(exc, KeyboardInterrupt):  # a signal raised where nothing could catch it
            # Sent again from a thread, a moment later: a signal raised in this hook (still
            # inside the finaliser's call) would be dropped the same way.
            _again_later(signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)
            return
        previous(unraisable)

    return hook


@contextlib.contextmanager
def signals_as_exceptions() -> Iterator[None]:
    """SIGTERM raises ``Terminated``, SIGINT ``KeyboardInterrupt``, in the main thread,
    for the duration; neither is lost in a callback nor raised inside a native import."""
    _FIRST_DEFERRED[0] = None
    _RECEIVED[0] = None
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _handler) for s in (signal.SIGTERM, signal.SIGINT)}
    hook, sys.unraisablehook = sys.unraisablehook, _unraisable(sys.unraisablehook)
    try:
        yield
        # Put off and the command ended before it came back, or raised and swallowed on the
        # way (a ``suppress``, a callback): the command ends as the signal asked.
        if (signum := _RECEIVED[0]) is not None:
            _raise(signum)
    finally:
        for timer in _TIMERS:
            timer.cancel()
        _TIMERS.clear()
        sys.unraisablehook = hook
        for signum, handler in previous.items():
            signal.signal(signum, handler)
