"""THE verdict table: every case state, and everything that depends on the state.

The schema enum, the overall precedence, the report's icons, the Actions annotation level,
the fail policy (which states fail a run, and which ``--fail-on`` may add) and the README's
table are all derived from ``VERDICTS``. Adding a state is one entry here plus its rule in
``ci_bench.judge.ladder``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import create_model

from ci_bench.schema.base import KEBAB, Model

AnnotationLevel = Literal["error", "warning", "notice"]


@dataclass(frozen=True)
class VerdictState:
    name: str
    icon: str
    annotation: AnnotationLevel | None  # ::error / ::warning per case in the Actions log
    fails: bool  # fails the run (exit 1) by default
    configurable: bool  # --fail-on / [tool.ci-bench.fail-on] may change ``fails``
    meaning: str  # one line for the README and the docs
    action: str = ""  # what a reviewer should do when the state is present (PR comment)
    baseline_action: str = ""  # the action outside a pull request (``compare``), if other
    # "case": a verdict of one case; "run": a fact about the whole run (a lost A/B, an
    # unfinished file), judged with the same precedence and fail policy.
    scope: Literal["case", "run"] = "case"
    # How the PR comment shows the state. ``headline``: the title's words when it is the
    # overall verdict ({n}: the ``count`` key's count, {s}: its plural), ``pr_headline`` in
    # a pull request's report; neither: the state's name. ``settled``: nothing to fix here,
    # the title says "no regression" ("no slowdown from this PR"). ``listed``: the section
    # its cases are listed in above the fold ("changed": what the deciding comparison
    # changed or cannot rule out; "drift"; "errors"; "inherited": failing at the merge base
    # too), none: counted only.
    headline: str = ""
    pr_headline: str = ""
    count: str = ""
    settled: bool = False
    listed: Literal["changed", "drift", "errors", "inherited"] | None = None

    @property
    def field(self) -> str:
        """The Python name of the state's fail-policy switch (``ab-missing`` -> ab_missing)."""
        return self.name.replace("-", "_")


# In precedence order: the overall verdict is the first state present.
VERDICTS: tuple[VerdictState, ...] = (
    VerdictState(
        "regression",
        "❌",
        "error",
        True,
        False,
        "significantly slower beyond the threshold",
        action="This PR makes these cases slower: fix it, or explain the trade-off in the PR "
        "for a maintainer to accept.",
        # Outside a pull request a regression is against the stored baseline only.
        baseline_action="These cases are slower than the stored baseline. Two runs on a shared "
        "machine can differ by more than a real change: `ci-bench ab --base REF` measures the "
        "change itself.",
        headline="{n} regression{s}",
        pr_headline="this PR makes {n} case{s} slower",
        count="regression",
        listed="changed",
    ),
    VerdictState(
        "error",
        "💥",
        "error",
        True,
        True,
        "the case failed or its output was wrong",
        action="Cases failed or gave wrong output: see Errors; the full traceback is in the "
        "job log.",
        listed="errors",
    ),
    VerdictState(
        "unmeasured",
        "🕳️",
        "error",
        True,
        True,
        "in this run's matrix but never measured (a lost shard, a crash, an unfinished run)",
        action="Cases were never measured (a lost shard, a crash): re-run the job.",
        listed="errors",
    ),
    VerdictState(
        "structural",
        "📐",
        "error",
        True,
        True,
        "the cost model read from the Pallas grid puts the case's time on a target TPU chip "
        "beyond the threshold (more HBM traffic, more grid steps, less overlap): exact, the "
        "same on every machine, no statistics needed",
        action="The kernel's structure got slower on a TPU (modelled: HBM bytes, grid steps): "
        "restore the tiling, or explain the trade-off for a maintainer to accept.",
        headline="{n} case{s} slower on TPU by the cost model",
        count="model-structural",
    ),
    VerdictState(
        "unfinished",
        "🚧",
        "error",
        True,
        False,
        "the results file says its run did not finish (complete: false): never passes, "
        "whatever its own matrix lists",
        action="The measurement did not finish: re-run the job (a resumed run keeps what "
        "was measured).",
        scope="run",
        headline="the measurement did not finish",
    ),
    VerdictState(
        "ab-missing",
        "🧩",
        "error",
        True,
        True,
        "the A/B against the base was expected but never reported (lost, crashed or timed "
        "out): the baseline diff alone cannot tell this pull request's effect from drift",
        action="The A/B against the base did not report: re-run the job (see the A/B job's "
        "log for why it failed).",
        scope="run",
        headline="the A/B against the base is missing",
    ),
    VerdictState(
        "kernel-removed",
        "🗑️",
        "error",
        True,
        True,
        "a kernel measured at the merge base is not in this pull request's config: a "
        "merge-conflict slip would otherwise lose its coverage unseen",
        action="A kernel of the merge base is gone from `[tool.ci-bench] kernels`: restore "
        "its line, or (removed on purpose) set `fail-on.kernel-removed = false`.",
        scope="run",
        headline="a kernel of the merge base is not in this PR's config",
    ),
    VerdictState(
        "same-code",
        "🪞",
        "error",
        True,
        True,
        "a kernel's code came from outside the repository (site-packages, a vendored path "
        "elsewhere): the A/B's base and head ran the same file, so it cannot see this pull "
        "request's change to it",
        action="The A/B ran the same kernel file on both sides: install the kernel's package "
        "from the checkout (`pip install -e .`, or keep it under the config's folder) so the "
        "merge base's copy is measured; for a pinned dependency set "
        "`fail-on.same-code = false`.",
        scope="run",
        headline="the A/B compared a kernel with itself",
    ),
    VerdictState(
        "missing",
        "❔",
        "warning",
        False,
        True,
        "in the baseline (same profile, whole matrix run) but not in this run",
        action="Cases in the baseline were not run: restore them, or bump the kernel version.",
    ),
    VerdictState(
        "accepted",
        "🤝",
        "notice",
        False,
        False,
        "a confirmed regression that a maintainer accepted for this head commit with the "
        "accept label (a new push needs the label again)",
        action="A maintainer accepted these slowdowns for this commit; a new push needs the "
        "label again.",
        listed="changed",
    ),
    VerdictState(
        "noisy",
        "⚠️",
        "warning",
        False,
        True,
        "past a threshold but not significant: measure again, or on a quieter machine",
        action="Changes past the threshold were not significant: re-run, or raise the repeats.",
        listed="changed",
    ),
    VerdictState(
        "drift",
        "〰️",
        "warning",
        False,
        False,
        "slower than the stored baseline past a threshold, established like a regression, but "
        "the same-run A/B against the base shows no such change from this pull request: the "
        "machine or an earlier merge moved",
        action="Timings moved since the baseline, not because of this PR: nothing to do here.",
        settled=True,
        listed="drift",
    ),
    VerdictState(
        "inherited",
        "🩹",
        "warning",
        False,
        True,
        "the case fails (an error or a wrong output) at the merge base too: not caused by "
        "this pull request, and not timed, so its effect on the case is unknown",
        action="Some cases fail at the merge base too (not this PR): see Also failing at the "
        "merge base; fix them on the base branch.",
        pr_headline="no slowdown from this PR; {n} case{s} also failing at the merge base",
        headline="{n} case{s} also failing at the base",
        count="inherited",
        listed="inherited",
    ),
    VerdictState(
        "toolchain",
        "🧰",
        "warning",
        False,
        False,
        "past a threshold, but the baseline was measured with another jax/jaxlib/libtpu (on "
        "a GPU: CUDA plugin, driver): never a regression; re-promote the baseline after a "
        "toolchain bump",
        action="The baseline is from another jax/jaxlib/libtpu: re-promote it with a release tag.",
        listed="changed",
    ),
    VerdictState(
        "incomparable",
        "↔️",
        None,
        False,
        False,
        "the baseline was recorded on another device (platform, device kind; CPU model on "
        "CPUs): never a regression",
        action="No baseline for this device yet: the next release tag promotes one.",
    ),
    VerdictState(
        "new",
        "🆕",
        None,
        False,
        False,
        "no baseline for this case (or no baseline file at all)",
        action="New cases have no baseline yet: the next release tag promotes one.",
        settled=True,
    ),
    VerdictState(
        "improved",
        "🚀",
        None,
        False,
        False,
        "significantly faster beyond the threshold",
        settled=True,
        listed="changed",
    ),
    VerdictState("pass", "✅", None, False, False, "within the thresholds", settled=True),
)
STATE = {s.name: s for s in VERDICTS}
VERDICT_NAMES: tuple[str, ...] = tuple(s.name for s in VERDICTS)
VERDICT_PRECEDENCE = VERDICT_NAMES
# A pydantic-checked enum of the names above (``Literal`` of the table's names).
Verdict = Literal[VERDICT_NAMES]  # type: ignore[valid-type]
CASE_VERDICT_NAMES: tuple[str, ...] = tuple(s.name for s in VERDICTS if s.scope == "case")
RUN_VERDICT_NAMES: tuple[str, ...] = tuple(s.name for s in VERDICTS if s.scope == "run")
CaseState = Literal[CASE_VERDICT_NAMES]  # type: ignore[valid-type]
RunStateName = Literal[RUN_VERDICT_NAMES]  # type: ignore[valid-type]
CONFIGURABLE: tuple[str, ...] = tuple(s.name for s in VERDICTS if s.configurable)


class _FailPolicyBase(Model):
    model_config = KEBAB

    def fails(self, state: str) -> bool:
        """Whether a case or run in ``state`` fails the run under this policy."""
        if state in CONFIGURABLE:
            return bool(getattr(self, STATE[state].field))
        return STATE[state].fails


_fields: dict[str, Any] = {STATE[name].field: (bool, STATE[name].fails) for name in CONFIGURABLE}
FailPolicy = create_model(  # type: ignore[call-overload]
    "FailPolicy",
    __base__=_FailPolicyBase,
    __doc__="Which configurable states also fail a run (exit 1); regressions always do.",
    **_fields,
)


def verdict_table_markdown() -> str:
    """The README's table of states, generated from ``VERDICTS`` (a test keeps them equal)."""
    rows = ["| verdict | meaning | fails the run |", "| --- | --- | --- |"]
    for s in VERDICTS:
        fails = ("yes" if s.fails else "no") + (" (configurable)" if s.configurable else "")
        scope = " (the whole run)" if s.scope == "run" else ""
        rows.append(f"| `{s.name}`{scope} | {s.meaning} | {fails} |")
    return "\n".join(rows)
