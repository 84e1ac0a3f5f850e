"""One fuzz input: the ``Input`` record, its special edits, the words that classify it.

Every input is classified up front: ``broken`` says why it is invalid for the command (an
exit 0 on it is a silent pass), ``valid`` that it must be accepted (an exit 2 on it is a
false refusal); neither means only the crash, hang and output oracles apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CANARY = "ZQX"
# Text that must stay inert in every markdown, annotation and HTML output.
MARKUP = [
    "<b>ZQX</b>",
    "<img src=ZQX onerror=alert(1)>",
    "[ZQX](https://evil.example/ZQX)",
    "![ZQX](https://evil.example/ZQX.png)",
    "@ZQX-team",
    "see https://evil.example/ZQX",
    "\n# ZQX heading",
    "</details>\n\n<b>ZQX</b>",
    "a | ZQX | b",
    "`ZQX",
    "\n::warning::ZQX",
    "javascript:alert(1)//ZQX",
    "\x1b[31mZQX",
]
HUGE_DIGITS = "9" * 5000

# Keys every reader requires (``*``: any list index); dropping one makes the file broken.
REQUIRED = {
    "results": [
        ("meta",),
        ("cases",),
        ("meta", "device"),
        ("meta", "settings"),
        ("meta", "started_at"),
        ("meta", "complete"),
        ("meta", "kernels"),
        ("cases", "*", "id"),
        ("cases", "*", "status"),
        ("cases", "*", "params"),
    ],
    "baseline": [("kernel",), ("entries",), ("entries", "*", "device"), ("entries", "*", "cases")],
    "report": [("verdict",), ("meta",), ("cases",), ("cases", "*", "verdict")],
    "artifact_report": [("verdict",), ("meta",), ("cases",)],
    "lowering": [("meta",), ("cases",), ("cases", "*", "id")],
    "history": [("commit",), ("time",), ("device",), ("cases",)],
}
# Commands that judge a results file (completeness matters), that read the config, and
# that read the event payload.
GATES = frozenset({"compare", "ci", "promote"})
CONFIG_READERS = frozenset(
    {"run", "list", "ci", "ab", "profile", "lower", "check-spec", "compare", "promote"}
    | {"history", "site", "comment"}
)
EVENT_READERS = frozenset({"ci", "comment"})
# Formats that forbid unknown keys (pr.json and event payloads ignore them).
STRICT = {"results", "baseline", "report", "artifact_report", "lowering", "history"}


@dataclass
class Input:
    """One command line against one workspace: the copy of the seed project, edited."""

    command: str
    argv: list[str]
    edits: dict[str, Any] = field(default_factory=dict)  # path -> bytes | special (below)
    env: dict[str, str] = field(default_factory=dict)
    valid: bool = False  # an exit 2 would refuse a valid input
    fault: str | None = None  # disk-full, summary: the failure must say so
    notes: list[str] = field(default_factory=list)  # the mutations applied
    # Why an exit 0 would be a silent pass, and for which commands (None: any command
    # reading the damaged file).
    broken_by: list[tuple[str, frozenset[str] | None]] = field(default_factory=list)
    pristine: Any = None  # the seed document: what an earlier mutation left untouched
    cost: int = 1  # its recipe's (a measuring ``ci`` role: 10): the hang limit doubles at 5

    def breaks(self, why: str, only: frozenset[str] | None = None) -> None:
        self.broken_by.append((why, only))
        self.valid = False

    @property
    def broken(self) -> str | None:
        """Why this input is broken for its command (None: valid or unknown)."""
        for why, only in self.broken_by:
            if only is None or self.command in only:
                return why
        return None

    def label(self) -> str:
        return f"{self.command} [{'; '.join(self.notes) or 'as recorded'}]"


# Special edits: a directory, a symbolic link to a target, a named pipe, a character device
# (made inside the workspace: a real /dev node is never touched), removal.
DIR, FIFO, DEVICE, REMOVE = "<dir>", "<fifo>", "<device>", "<remove>"


def symlink_to(target: str) -> str:
    return f"<symlink:{target}>"
