"""The one rule every role that writes the sticky comment follows (pure): what it writes
is about the pull request as it is NOW (``GET /pulls/N``), never only about the head its
event, or an artifact, names.

A run for an older head (a re-run of an old run, a labelled run that a fork's push
overtook, a lowering run that finished late) does not post its verdict: it says which run
finished and where the pull request is, and for a fork whose labelled commit is no longer
the head, that the new head needs the label again.
"""

from __future__ import annotations

from dataclasses import dataclass

from ci_bench.report.sticky import moved_on, older_run


@dataclass(frozen=True)
class Now:
    """What a role may write, given the pull request's current head."""

    current: bool  # the run is about the current head: write as planned
    line: str = ""  # for the job's log when it is not
    # The verdict section to write instead (a fork's "needs the label again"), or None.
    section: str | None = None


def against_now(run_head: str, now_head: str, *, fork: bool, measured: bool, label: str) -> Now:
    """The rule. ``measured``: the run measured its head (a labelled fork run whose PR
    moved on must say so, else its verdict would stand for a commit nobody labelled)."""
    if run_head.lower() == now_head.lower():
        return Now(current=True)
    line = older_run(run_head, now_head)
    if fork and measured:
        return Now(current=False, line=line, section=moved_on(run_head, now_head, label))
    return Now(current=False, line=line)
