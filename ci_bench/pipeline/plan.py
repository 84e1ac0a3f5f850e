"""The plan (pure): which steps a pipeline role runs for an event, against what, and what
each missing piece means.

The benchmark workflow is a few jobs, each one ``ci-bench ci --role ROLE`` call. The first
job (``plan``, default-branch code only) decides with ``gate`` which jobs run for the event
and writes that decision as one JSON output; every later job reads it back
(``CI_BENCH_PLAN``) instead of deciding again, so the fork/label gate, the A/B decision and
the shard count are written once, here, and tested here. ``plan_for`` then lists one role's
steps, which are what the runner runs (``pipeline.steps``). Nothing in this module reads
files, the environment, git or the network.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any, Literal

from ci_bench.errors import InputError
from ci_bench.github.context import Dispatch, Event, PullRequest, Release
from ci_bench.schema import Acceptance
from ci_bench.text import one_line

Role = Literal[
    "all", "plan", "shard", "ab", "report", "comment", "lower", "relay", "promote", "record"
]
ROLES: tuple[Role, ...] = (
    "all",
    "plan",
    "shard",
    "ab",
    "report",
    "comment",
    "lower",
    "relay",
    "promote",
    "record",
)
# A maintainer's labels: `benchmark` lets a fork's commit reach the TPU runners; the accept
# label does that too and turns the commit's confirmed regressions into `accepted`.
MEASURE_LABEL = "benchmark"
ACCEPT_LABEL = "benchmark-accept"
GO_LABELS = (MEASURE_LABEL, ACCEPT_LABEL)
MAX_SHARDS = 64


class Step(StrEnum):
    GATE = "gate"  # decide which jobs of the workflow run (the plan job)
    MEASURE = "measure"  # the selection (or one shard of it) into results, saved per case
    CONFIRM = "confirm"  # re-measure cases flagged either way before the verdict
    AB = "ab"  # head against the A/B base, interleaved round by round, in workers
    MERGE = "merge"  # join the shards' results; a lost shard's cases are unmeasured
    JUDGE = "judge"  # against the baselines (and the A/B: one pull-request verdict)
    # report files; unless --no-publish, job summary, step outputs, annotations
    PUBLISH = "publish"
    COMMENT = "comment"  # the one sticky pull-request comment
    LOWER = "lower"  # lower every case for TPU (no accelerator needed)
    RELAY = "relay"  # a pull_request workflow's result into the sticky comment
    PROMOTE = "promote"  # results become baselines (release tags)
    RECORD = "record"  # one history record (pushes to the default branch)


# needs-label: a fork's new head awaits a label; withdrawn: a fork's accept label was removed
# (its head is measured again only on a label).
Notice = Literal["needs-label", "withdrawn"]


@dataclass(frozen=True)
class Gate:
    """The plan job's decision for one event: which jobs run, for which commit, and why."""

    measure: bool = False  # the shard jobs and the report
    ab: bool = False  # the A/B job
    shards: int = 1
    head_sha: str | None = None
    reason: str = ""
    # Said in the sticky comment when nothing is measured: a fork's new head awaits a label.
    notice: Notice | None = None
    acceptance: Acceptance | None = None
    # The PR's base commit (baselines are read there) and the A/B base (merge base of head
    # and base, resolved where the history is: the A/B job).
    base_sha: str | None = None
    ab_base: str | None = None
    ab_base_kind: Literal["merge-base", "ref", "default-branch"] | None = None
    number: int | None = None
    # Why the accept label was not taken as an acceptance (said in the comment).
    refused: str | None = None

    def to_json(self) -> str:
        data = asdict(self)
        if self.acceptance is not None:
            data["acceptance"] = self.acceptance.model_dump()
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Gate:
        """The plan job's output, read back by every later job (one-line error if broken).
        The jobs read it with the one reader's limits (``from_value``, pipeline/run.py)."""
        try:
            data = json.loads(text)
        except RecursionError:
            raise InputError("CI_BENCH_PLAN: nested too deeply for a plan") from None
        except ValueError as exc:
            raise InputError(f"CI_BENCH_PLAN: not JSON: {one_line(exc)}") from None
        return cls.from_value(data)

    @classmethod
    def from_value(cls, data: Any) -> Gate:
        """A parsed plan (one-line error if it is not one)."""
        try:
            if not isinstance(data, dict):
                raise TypeError("not an object")
            accepted = data.pop("acceptance", None)
            gate = cls(**data)
            acceptance = Acceptance.model_validate(accepted) if accepted else None
        except (ValueError, TypeError) as exc:
            raise InputError(
                f"CI_BENCH_PLAN: not a plan from `ci-bench ci --role plan`: {one_line(exc)}"
            ) from None
        if not isinstance(gate.shards, int) or not 1 <= gate.shards <= MAX_SHARDS:
            raise InputError(f"CI_BENCH_PLAN: shards must be 1..{MAX_SHARDS}, got {gate.shards!r}")
        return cls(**{**asdict(gate), "acceptance": acceptance})

    @property
    def report(self) -> bool:
        """The report job runs when anything is measured (the shards, or the A/B alone)."""
        return self.measure or self.ab

    @property
    def comment(self) -> bool:
        """The comment job has something to say: a verdict, a failure, or a notice."""
        return self.number is not None and (self.report or self.notice is not None)

    def outputs(self) -> dict[str, str]:
        """The plan job's step outputs: the whole plan, and each job's condition."""
        flags = {"measure": self.measure, "ab": self.ab, "report": self.report}
        return {
            "plan": self.to_json(),
            **{name: str(value).lower() for name, value in flags.items()},
            "comment": str(self.comment).lower(),
            "shards": json.dumps(list(range(1, self.shards + 1))),
        }


def gate(event: Event | None, pr_mode: str, shards: int = 2) -> Gate:
    """Which jobs run for ``event``; ``pr_mode`` is the default branch's (or the repository
    variable's) choice for pull requests: baseline, ab or both.

    Pull requests from the same repository measure on every push. A fork's commit is
    measured only on the ``labeled`` event for a go label, i.e. exactly the commit the
    maintainer labelled; its later pushes measure nothing and say the new head needs the
    label. Other labels start nothing.
    """
    if not 1 <= shards <= MAX_SHARDS:
        raise InputError(f"shards must be between 1 and {MAX_SHARDS}, got {shards}")
    if isinstance(event, Dispatch):
        mode = event.mode or "baseline"
        kind = "ref" if event.base else "default-branch"
        base = event.base or event.default_branch
        return Gate(
            measure=mode != "ab",
            ab=mode != "baseline",
            shards=shards,
            reason=f"manual run, mode {mode}",
            ab_base=base if mode != "baseline" else None,
            ab_base_kind=kind if mode != "baseline" else None,
        )
    if not isinstance(event, PullRequest):
        return Gate(reason="not a pull request or manual run: nothing to measure here")
    common: dict[str, Any] = {
        "head_sha": event.head_sha,
        "base_sha": event.base_sha,
        "number": event.number,
        "shards": shards,
    }
    if event.action == "unlabeled":
        # Taking the accept label off withdraws the acceptance: judge the head again. A
        # fork's head is measured only on a go label, so it waits for one.
        if event.label != ACCEPT_LABEL:
            return Gate(**common, reason=f"removing the label {event.label!r} starts nothing")
        go = not event.from_fork
        reason = f"the {ACCEPT_LABEL!r} label was removed: judged again without it"
        if not go:
            reason = f"the {ACCEPT_LABEL!r} label was removed: a fork's head waits for a label"
            return Gate(**common, reason=reason, notice="withdrawn")
    elif event.action == "labeled":
        if event.label not in GO_LABELS:
            return Gate(**common, reason=f"the label {event.label!r} starts nothing")
        go = True
        reason = f"labelled {event.label!r} by {event.sender or 'an unnamed sender'}"
    elif event.from_fork:
        go = False
        reason = f"a fork's push: {event.head_sha[:12]} needs the {MEASURE_LABEL!r} label"
    else:
        go, reason = True, f"pull request {event.action}"
    if not go:
        return Gate(**common, reason=reason, notice="needs-label")
    ab = pr_mode in ("ab", "both")
    acceptance, refused = None, None
    if event.action == "labeled" and event.label == ACCEPT_LABEL:
        if event.sender is None:  # nobody to hold to it: never "accepted by @unknown"
            refused = "the label event names no sender"
        else:
            acceptance = Acceptance(label=ACCEPT_LABEL, by=event.sender, head_sha=event.head_sha)
    return Gate(
        **common,
        measure=pr_mode != "ab",
        ab=ab,
        reason=reason,
        acceptance=acceptance,
        refused=refused,
        ab_base=event.base_sha if ab else None,
        ab_base_kind="merge-base" if ab else None,
    )


# Who may accept: like an approval, someone with write access who did not write the change.
# Roles as GitHub names them (``role_name``); a custom role counts by the base it maps to.
ACCEPTING_ROLES = ("admin", "maintain", "write")
BASE_ROLES = ("admin", "maintain", "write", "triage", "read")
_ACCEPTING_LEGACY = ("admin", "write")
_WHO = "a maintainer other than the author accepts a regression"


def acceptance_refusal(by: str, author: str | None, role: str, legacy: str) -> str | None:
    """Why ``by``'s accept label is no acceptance (None: it is one): the pull request's
    author cannot approve their own change, nor can an account whose role (``role``,
    GitHub's ``role_name``; ``legacy``: the permission a custom role maps to) has no write
    access. The legacy permission alone would read maintain as write and triage as read."""
    if author is not None and by.lower() == author.lower():
        return f"@{by} opened this pull request: an author cannot accept their own change ({_WHO})"
    allowed = role in ACCEPTING_ROLES if role in BASE_ROLES else legacy in _ACCEPTING_LEGACY
    if allowed:
        return None
    if role == "none":
        held = "is not a collaborator here"
    elif role in BASE_ROLES:
        held = f"has the {role} role here"
    else:
        held = f"has the custom role {role!r} here (based on {legacy})"
    return f"@{by} {held}; accepting needs the write, maintain or admin role ({_WHO})"


def label_gone(label: str) -> str:
    """Why an acceptance from an earlier event no longer holds (a re-run, a late run)."""
    return (
        f"the {label} label is no longer on the pull request (it was removed after the "
        "event this run is for): a re-run or a late run never brings back a withdrawn "
        "acceptance, so the verdict is judged without it"
    )


def role_unread(by: str) -> str:
    """Why an acceptance was not taken when GitHub did not answer (the public text: the
    error itself is in the plan job's log)."""
    return (
        f"@{by}'s role could not be read from GitHub (GitHub's answer is in the plan job's "
        "log); re-run this workflow once GitHub answers and the label is read again"
    )


def with_acceptance_vetted(
    gate_: Gate, author: str | None, role: str, legacy: str, labels_now: Sequence[str]
) -> Gate:
    """The gate with its acceptance kept or refused: the accept label must be on the pull
    request now (``labels_now``, read from GitHub by the plan job) and the labeller's role
    (``role``, ``legacy``) must allow it."""
    if gate_.acceptance is None:
        return gate_
    if gate_.acceptance.label not in labels_now:
        return replace(gate_, acceptance=None, refused=label_gone(gate_.acceptance.label))
    why = acceptance_refusal(gate_.acceptance.by, author, role, legacy)
    if why is None:
        return gate_
    return replace(gate_, acceptance=None, refused=why)


@dataclass(frozen=True)
class Plan:
    """One role's steps, and what a missing piece means for it."""

    role: Role
    steps: tuple[Step, ...]
    gate: Gate = field(default_factory=Gate)
    # The report must hold an A/B: without one the run is ``ab-missing`` (never a silent
    # baseline-only verdict).
    expect_ab: bool = False

    def has(self, step: Step) -> bool:
        return step in self.steps


_STEPS: dict[Role, tuple[Step, ...]] = {
    "plan": (Step.GATE,),
    "shard": (Step.MEASURE, Step.CONFIRM),
    "ab": (Step.AB,),
    "report": (Step.MERGE, Step.JUDGE, Step.PUBLISH),
    "comment": (Step.COMMENT,),
    "lower": (Step.LOWER, Step.MEASURE),
    "relay": (Step.RELAY,),
    "promote": (Step.MEASURE, Step.PROMOTE),
    "record": (Step.MEASURE, Step.JUDGE, Step.RECORD),
}


def plan_for(
    role: Role, event: Event | None, gate_: Gate, *, mode: str, comment: bool, publish: bool
) -> Plan:
    """The steps ``role`` runs. ``all`` is the single-job pipeline (a laptop, a one-job
    workflow): measure, confirm, the A/B when ``mode`` asks, judge, publish, comment."""
    if role == "all":
        if isinstance(event, Release):
            return Plan("promote", _STEPS["promote"], gate_)
        steps: list[Step] = []
        if mode != "ab":
            steps += [Step.MEASURE, Step.CONFIRM]
        if mode in ("ab", "both"):
            steps.append(Step.AB)
        steps += [Step.JUDGE, Step.PUBLISH]  # the report files are written even unpublished
        if publish and comment and isinstance(event, PullRequest):
            steps.append(Step.COMMENT)
        return Plan("all", tuple(steps), gate_, expect_ab=mode in ("ab", "both"))
    if role not in _STEPS:
        raise InputError(f"--role: {role!r} is not one of {', '.join(ROLES)}")
    return Plan(role, _STEPS[role], gate_, expect_ab=gate_.ab and role == "report")
