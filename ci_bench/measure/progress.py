"""Progress lines: one live line per case on a terminal, plain log lines elsewhere (CI logs)."""

from __future__ import annotations

from typing import TextIO

from ci_bench.contract.spec import Case
from ci_bench.schema import CaseResult
from ci_bench.text import fmt_ms


def describe(result: CaseResult) -> str:
    if result.status != "ok":
        return f"ERROR {result.error}"
    pallas = result.pallas.mean_ms if result.pallas else None
    native = result.native.mean_ms if result.native else None
    return (
        f"ok pallas {fmt_ms(pallas)} ms, native {fmt_ms(native)} ms, "
        f"compile {fmt_ms(result.compile.pallas_ms)} ms"
    )


class Progress:
    """Writes to ``stream`` (stderr), so stdout carries only the table or JSON."""

    def __init__(self, stream: TextIO, *, live: bool, quiet: bool = False) -> None:
        self.stream = stream
        self.live = live
        self.quiet = quiet

    def start(self, index: int, total: int, case: Case) -> None:
        if self.live and not self.quiet:
            self.stream.write(f"\r\x1b[2K[{index}/{total}] {case.id} … running")
            self.stream.flush()

    def done(self, index: int, total: int, result: CaseResult) -> None:
        if self.quiet:
            if result.traceback:
                self.stream.write(f"{result.id}: {result.traceback}\n")
            return
        prefix = "\r\x1b[2K" if self.live else ""
        self.stream.write(f"{prefix}[{index}/{total}] {result.id} {describe(result)}\n")
        if result.traceback:  # the log gets the whole story; tables and comments one line
            self.stream.write(result.traceback + "\n")
        self.stream.flush()

    def note(self, message: str) -> None:
        if not self.quiet:
            self.stream.write(f"ci-bench: {message}\n")
            self.stream.flush()
