"""THE verdict ladder, shared by baseline comparison and A/B (pure).

Every comparison, whatever its statistics, reduces a case to the same evidence: did the
estimate pass a threshold (which way), is the change significant (after false-discovery
control across the matrix), and, when the case was re-measured, did the change hold. The
ladder turns that evidence into a state; a rule change is made here once.

The states a case takes before any comparison (``error``, ``new``, ``incomparable``,
``missing``, ``unmeasured``) are rungs below it: ``before_comparison``, ``not_run`` and
``never_measured``. Every state of ``ci_bench.schema.verdicts`` is assigned here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ci_bench.schema import BaselineEntry, BaselineFile, CaseResult, RunMeta, Thresholds, Verdict

Direction = Literal["slower", "faster"]


def past_threshold(
    mean_change: float, tflops_ratio: float | None, t: Thresholds
) -> Direction | None:
    """The specification's two rules: mean_ms beyond ±``mean_slowdown``, or TFLOPS beyond
    ±``tflops_drop``. Slower wins if both directions somehow hold."""
    if mean_change > t.mean_slowdown or (
        tflops_ratio is not None and tflops_ratio < 1 - t.tflops_drop
    ):
        return "slower"
    if mean_change < -t.mean_slowdown or (
        tflops_ratio is not None and tflops_ratio > 1 + t.tflops_drop
    ):
        return "faster"
    return None


@dataclass(frozen=True)
class Evidence:
    """What a comparison found for one case, before any verdict."""

    estimate: str  # how the change reads, e.g. "+12.0% mean" or "ratio 1.120 [1.05, 1.19]"
    direction: Direction | None  # past a threshold, which way; None: within thresholds
    p_value: float  # one-sided, in ``direction``
    significant: bool  # after false-discovery control across the matrix
    # The confirmation pass: None when not re-measured, else (held, its p-value), where held
    # means past the threshold the same way and significant at the level again.
    confirmation: tuple[bool, float] | None = None
    # Measured with another jax/jaxlib/libtpu than the reference: a change is reported as
    # ``toolchain``, never as a regression of the code.
    toolchain: str | None = None
    # The confirmation pass was expected (on) but could not run for this case (a merged
    # report judged across shards): an unconfirmed flag is ``noisy``, never a regression
    # (nor an improvement).
    confirmation_required: bool = False


@dataclass(frozen=True)
class Rung:
    verdict: Verdict
    reason: str
    confirmed: bool | None  # null unless a flagged change was re-measured


def climb(e: Evidence, t: Thresholds) -> Rung:
    """pass -> noisy (not significant) -> noisy (not reproduced / not confirmed) ->
    toolchain (another jax) -> regression / improved.

    Past a threshold but not significant is ``noisy``, a warning: a gate that cries wolf gets
    switched off. A significant change that a re-measurement does not reproduce is ``noisy``
    too. Only a significant change that held (or was not re-measured) is a verdict.
    """
    if e.direction is None:
        return Rung("pass", f"{e.estimate}, within thresholds", None)
    p = f"p={e.p_value:.2g}"
    if not e.significant:
        reason = (
            f"{e.estimate}, not significantly {e.direction} "
            f"({p}, false-discovery rate {t.significance:g})"
        )
        return Rung("noisy", reason, None)
    if e.confirmation is not None and not e.confirmation[0]:
        again = f"p={e.confirmation[1]:.2g}"
        return Rung(
            "noisy", f"{e.estimate} ({p}) but not reproduced when re-measured ({again})", False
        )
    if e.confirmation is None and e.confirmation_required:
        reason = f"{e.estimate} ({p}) but not confirmed: no re-measurement ran for this case"
        return Rung("noisy", reason, None)
    held = " and confirmed on re-measurement" if e.confirmation is not None else ""
    confirmed = True if e.confirmation is not None else None
    if e.toolchain is not None:
        reason = f"{e.estimate}, significantly {e.direction} ({p}){held}; {e.toolchain}"
        return Rung("toolchain", reason, confirmed)
    verdict: Verdict = "regression" if e.direction == "slower" else "improved"
    return Rung(verdict, f"{e.estimate}, significantly {e.direction} ({p}){held}", confirmed)


def before_comparison(
    case: CaseResult,
    base: CaseResult | None,
    baseline: BaselineFile | None,
    entry: BaselineEntry | None,
    meta: RunMeta,
) -> Rung | None:
    """The rungs below the ladder: a case that failed, has no baseline, or whose baseline
    measured something else; None when its times can be compared (then ``climb``)."""
    if case.status != "ok":
        return Rung("error", case.error or "error", None)
    if baseline is None:
        return Rung("new", "no baseline file", None)
    if entry is None:
        devices = ", ".join(e.device.identity for e in baseline.entries)
        reason = f"baseline recorded on {devices}; this run on {meta.device.identity}"
        return Rung("incomparable", reason, None)
    if entry.settings.timer != meta.settings.timer:
        # Issue 13: wall time and trace device time measure different things; a change
        # of timer must never read as a regression (or an improvement).
        reason = f"baseline timed by {entry.settings.timer}, this run by {meta.settings.timer}"
        return Rung("incomparable", reason, None)
    if base is None:
        return Rung("new", "not in the baseline", None)
    if base.implementations.subject != case.implementations.subject:
        # Issue 21: a SPEC that names another subject times another implementation.
        reason = (
            f"baseline timed implementation {base.implementations.subject}, this run "
            f"{case.implementations.subject}"
        )
        return Rung("incomparable", reason, None)
    return None


def not_run(profile: str | None) -> Rung:
    """A case of the baseline (same profile, whole matrix) this run did not measure."""
    return Rung("missing", f"in the {profile} baseline, not run", None)


def never_measured(why: str) -> Rung:
    """A case of the run's own matrix with no result: it fails, never passes unmeasured."""
    return Rung("unmeasured", f"in this run's matrix but never measured ({why})", None)
