"""From results to the one report: the stored baselines (read at the PR's base commit),
the A/B when there is one, the run-level states, a maintainer's acceptance."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from ci_bench.errors import InputError
from ci_bench.judge.compare import build_report, compare
from ci_bench.judge.pr import accept, pr_report, with_run_states
from ci_bench.pipeline.git import export_folder
from ci_bench.pipeline.request import Request
from ci_bench.schema import (
    REPORT_READABLE,
    RESULTS_READABLE,
    Acceptance,
    Report,
    Results,
    RunState,
)
from ci_bench.store.baselines import lookups_for, unnamed_matrix
from ci_bench.store.files import read_model


def load_results(path: Path) -> Results:
    return read_model(path, Results, what="results", schema_version=RESULTS_READABLE)


def load_report(path: Path) -> Report:
    return read_model(path, Report, what="report", schema_version=REPORT_READABLE)


def baselines_folder(request: Request) -> Path:
    """The baseline folder to read: the store itself, or its copy at the request's ref."""
    source = request.baselines
    if source.ref is None:
        return source.folder

    scratch = request.outputs.out_dir / "baselines-at-base"
    shutil.rmtree(scratch, ignore_errors=True)
    return export_folder(request.config.root, source.ref, source.folder, scratch)


def baseline_report(
    request: Request,
    results: Results,
    *,
    require_confirmation: bool = False,
    expected: Sequence[str] | None = None,
) -> Report:
    """Judge results against the baselines the request names.

    ``expected``: the case ids the run had to measure, where the caller knows them from the
    kernels' SPECs rather than from the file (a file can only vouch for what it holds).
    An unfinished run never passes (``unfinished``); a version-1 file that did not finish
    does not even say what it missed, and is refused.
    """
    if not results.meta.complete and results.meta.matrix is None:
        raise InputError(
            f"{request.inputs.results or 'results'}: meta.complete: the run did not finish and "
            "the file (format 1) does not say which cases are missing; re-run it"
        )
    if expected is None and results.meta.matrix is None and results.schema_version >= 2:
        raise InputError(unnamed_matrix(request.inputs.results or "results", results))
    if expected is not None:
        known = list(results.meta.matrix or [])
        extra = [c for c in expected if c not in set(known)]
        results = results.model_copy(
            update={"meta": results.meta.model_copy(update={"matrix": known + extra})}
        )
    source = request.baselines
    folder = baselines_folder(request)
    lookups = lookups_for(results, folder, list(source.files), source.pins)
    return compare(
        results,
        lookups,
        request.thresholds,
        request.policy,
        require_confirmation=require_confirmation,
        target_chips=request.config.target_chips,
    )


def ab_missing(why: str) -> RunState:
    return RunState(state="ab-missing", reason=why)


def final_report(
    baseline: Report | None,
    ab: Report | None,
    request: Request,
    *,
    expect_ab: bool,
    ab_missing_why: str = "the A/B job left no report",
    acceptance: Acceptance | None = None,
) -> Report:
    """The one verdict of a run: the baseline comparison decided by the A/B (a PR report),
    or either alone; an A/B that was expected and never reported is ``ab-missing``."""
    if baseline is not None and ab is not None:
        report = pr_report(baseline, ab, request.policy)
    elif baseline is not None:
        report = baseline
        if expect_ab:
            report = with_run_states(report, [ab_missing(ab_missing_why)])
    elif ab is not None:
        report = ab
    else:
        raise InputError("nothing to judge: no results and no A/B report")
    return accept(report, acceptance)


def withdrawn(report: Report) -> Report:
    """The report as judged without its acceptance (the label was removed while the run
    measured): every accepted part back to what the ladder found (``judge.pr.accept``'s
    inverse), the verdict, counts, headline and exit code recomputed."""
    given = report.acceptance
    if given is None:
        return report
    note = f"accepted by @{given.by} for {given.head_sha[:12]} ({given.label})"

    def without(reason: str | None, suffix: str) -> str | None:
        if reason is None or not reason.endswith(suffix):
            return reason
        kept = reason.removesuffix(suffix)
        return None if kept == "None" else kept

    cases = []
    for v in report.cases:
        update: dict = {}
        if v.verdict == "accepted":
            update = {"verdict": "regression", "reason": without(v.reason, f"; {note}")}
        if v.memory_verdict == "accepted":
            update["memory_verdict"] = "regression"
            update["reason"] = without(update.get("reason", v.reason), f"; memory growth {note}")
        if v.model is not None and v.model.verdict == "accepted":
            reason = without(v.model.reason, f"; {note}") or v.model.reason
            update["model"] = v.model.model_copy(update={"verdict": "structural", "reason": reason})
        cases.append(v.model_copy(update=update) if update else v)
    rebuilt = build_report(
        cases,
        report.kernels,
        report.meta,
        report.thresholds,
        report.policy,
        mode=report.mode,
        base_ref=report.base_ref,
        run_states=report.run_states,
    )
    return rebuilt.model_copy(update={"head_sha": report.head_sha, "run_url": report.run_url})
