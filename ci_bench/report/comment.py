"""The PR comment and job summary: a verdict a reviewer reads in ten seconds (pure).

Layout, top to bottom: the verdict, whether the times are an interpreter's, what to do;
notes that add to the verdict; what THIS pull request changed (the A/B in a PR report, the
cases past a threshold otherwise) with a Δ bar, the rest counted in one line; established
drift; baseline excesses that are not, collapsed; errors; then, collapsed, every case per
kernel and the method in one line. Every table fits a 900 px conversation column.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from statistics import median

from ci_bench import docs_url
from ci_bench.judge.ladder import past_threshold
from ci_bench.judge.model import structural_only, structural_text
from ci_bench.report.chart import bar_legend
from ci_bench.report.comment_tables import (
    ab_text,
    case_cell,
    changed_table,
    drift_table,
    footnotes,
    full_tables,
    pct,
)
from ci_bench.report.escape import md_inline, safe_url
from ci_bench.report.render import (
    INTERPRETED_MARK,
    INTERPRETER,
    interpreter_words,
)
from ci_bench.report.rows import VERDICT_ICONS, ordered, short_ref, short_shas
from ci_bench.report.unit_metrics import comment_section
from ci_bench.schema import STATE, CaseVerdict, KernelSummary, Report
from ci_bench.schema.chips import chips_named
from ci_bench.text import case_count

# States a reviewer should see above the fold, besides drift (which has its own section):
# the verdict table's ``listed`` says which.
CHANGED = tuple(s.name for s in STATE.values() if s.listed == "changed")
# Kernel notes that only restate the report's mode (its method line and footer say it).
_MODE_NOTES = (
    re.compile(r"PR verdict: A/B against .* decides"),
    re.compile(r"A/B against .*, measured in the same process"),
)


def _summary_line(report: Report) -> str:
    counts = [f"{n} {state}" for state, n in report.counts.items() if state in STATE]
    if report.counts.get("memory-regression"):
        counts.insert(0, f"{report.counts['memory-regression']} memory regression")
    return f"{' · '.join(counts) or 'no cases'} — {case_count(len(report.cases))}"


def _title(report: Report) -> str:
    """The overall verdict's headline, as its entry of the verdict table says."""
    state = STATE[report.verdict]
    pr = report.mode == "pr"
    n = report.counts.get(state.count, 0) if state.count else 0
    headline = (state.pr_headline if pr else "") or state.headline
    if state.settled:
        what = "no slowdown from this PR" if pr else "no regression"
    elif headline and (n or not state.count):
        what = headline.format(n=n, s="s" if n > 1 else "")
    else:
        what = state.name
    return f"### {state.icon} ci-bench: {what}"


def _actions(report: Report) -> list[str]:
    present = [s for s in STATE.values() if report.counts.get(s.name) and s.action]
    if report.counts.get("memory-regression"):
        present.insert(0, STATE["regression"])
    seen: list[str] = []
    for state in present:
        action = (state.baseline_action if report.mode == "baseline" else "") or state.action
        if action not in seen:
            seen.append(action)
    return seen[:3] or ["Nothing to do."]


def _footer(report: Report) -> list[str]:
    meta = report.meta
    device = meta.device
    where = f"{device.platform} · {device.device_kind}"
    if device.platform == "cpu":
        where += f" · {device.cpu_model}"
    commit = (report.head_sha or meta.git.commit or "-")[:12]
    head = "PR head" if report.head_sha else "commit"
    shown = f"`{commit}`" if re.fullmatch(r"[0-9a-f]{1,12}", commit) else md_inline(commit)
    url = safe_url(report.run_url)
    run = f" · [benchmark run]({url})" if url else ""
    # Every field below comes from the report file (an artifact): escaped, one line each.
    profile = md_inline(f"profile {meta.profile or 'ad-hoc'}")
    lines = [f"{md_inline(f'{where} · {device.software}')} · {head} {shown} · {profile}{run}"]
    if report.mode in ("ab", "pr") and report.base_ref:
        lines.append(f"A/B base: {md_inline(short_ref(report.base_ref) or '')}")
        lines += _changed_code(report)
    lines += [
        f"Baseline: {md_inline(_provenance(k))}" for k in report.kernels if report.mode != "ab"
    ]
    return [f"<sub>{line}</sub><br>" for line in lines]


def _changed_code(report: Report, most: int = 5) -> list[str]:
    """The kernel files this PR changed, each side traced from its own checkout: what the
    A/B compared (issue 37)."""
    changed = sorted({f for k in report.kernels if k.sources for f in k.sources.changed})
    if not changed:
        return []
    more = f" and {len(changed) - most} more" if len(changed) > most else ""
    files = ", ".join(changed[:most]) + more
    return [f"A/B code: {md_inline(files)}, changed by this PR: the base ran its own copy"]


def _provenance(k: KernelSummary) -> str:
    if k.baseline_version is None:
        return f"{k.kernel} v{k.version}: none yet"
    p = k.provenance
    if p is None:
        return f"{k.kernel} v{k.version}: v{k.baseline_version} has no entry for this device"
    return (
        f"{k.kernel} v{k.version} vs v{k.baseline_version} (tag {p.tag or '-'}, "
        f"commit {(p.commit or '-')[:12]}, measured {p.measured_at:%Y-%m-%d})"
    )


def _modes(report: Report) -> list[str | None]:
    """The interpret mode of every kernel the report shows (its banner names them)."""
    return report.meta.settings.interpreters(k.kernel for k in report.kernels)


def _interpreted(report: Report) -> list[str]:
    if not report.meta.settings.interpret:
        return []
    return [
        "",
        f"> **{INTERPRETED_MARK} {INTERPRETER}.** "
        f"{interpreter_words(_modes(report))} on this runner: the "
        "verdicts compare interpreter times; speedup, TFLOPS and MFU marked "
        f"{INTERPRETED_MARK} are the interpreter's, not the kernel's.",
    ]


def _notes(report: Report) -> list[str]:
    """Kernel notes and warnings that add to the verdict line, once each, short shas."""
    by_text: dict[str, list[str]] = {}
    for k in report.kernels:
        if k.note and not any(p.search(k.note) for p in _MODE_NOTES):
            by_text.setdefault(short_shas(k.note), []).append(k.kernel)
    notes = [f"> {md_inline(', '.join(ks))}: {md_inline(text)}" for text, ks in by_text.items()]
    warnings = [short_shas(w) for k in report.kernels for w in k.warnings]
    warnings += _bytes_warnings(report)
    notes += [f"> ⚠️ {md_inline(w)}" for w in dict.fromkeys(warnings)]
    return notes


def _bytes_warnings(report: Report) -> list[str]:
    """A bytes model that fails the check where it is meaningful (a one-pass native)."""
    out = []
    for kernel in dict.fromkeys(v.kernel for v in report.cases):
        wrong = [
            v.current
            for v in report.cases
            if v.kernel == kernel
            and v.current is not None
            and v.current.bytes_check is not None
            and v.current.bytes_check.status == "mismatch"
        ]
        if wrong and wrong[0].bytes_check is not None:
            out.append(
                f"{kernel}: bytes model disagrees with XLA in {len(wrong)} case(s), e.g. "
                f"{wrong[0].id}: {wrong[0].bytes_check.reason}; GB/s and HBM % may be wrong"
            )
    return out


def _legend(mode: str) -> str:
    if mode in ("pr", "ab"):
        return "¹ head against the PR's merge base, same job: median paired change [95 % interval];"
    return "² mean time against the stored baseline;"


def _changed(report: Report) -> list[CaseVerdict]:
    """What the comparison that decides calls changed, or cannot rule out (noisy); memory
    regressions and the cost model's structural changes."""
    return ordered(
        [
            v
            for v in report.cases
            if v.verdict in CHANGED
            or v.memory_verdict == "regression"
            or (v.model is not None and v.model.verdict in ("structural", "accepted"))
        ]
    )


def _unchanged_line(report: Report, shown: Sequence[CaseVerdict]) -> list[str]:
    """The passing cases in one line: how many, and what their comparisons could see."""
    rest = [v for v in report.cases if v.verdict == "pass" and v not in shown]
    if not rest:
        return []
    t = report.thresholds.mean_slowdown
    ab = report.mode in ("pr", "ab")
    against = "in the A/B against the base" if ab else "against the baseline"
    mdcs = [v.mdc for v in rest if v.mdc is not None]
    seen = f" (MDC median ±{median(mdcs):.1%}, largest ±{max(mdcs):.1%})" if mdcs else ""
    blind = sum(1 for v in rest if v.min_repeats is not None or (v.mdc or 0) > t)
    unsure = f"; {blind} of them could not rule out a {t:.0%} change" if blind else ""
    n = len(rest)
    cases = f"{n} other case{'s' if n > 1 else ''}"
    return ["", f"✅ {cases}: no change past ±{t:.0%} {against}{seen}{unsure}."]


def _information(report: Report) -> list[str]:
    """Baseline excesses a PR report does not call drift: one collapsed line."""
    if report.mode != "pr":
        return []
    t = report.thresholds
    moved = [
        v
        for v in ordered(report.cases)
        if v.verdict == "pass"
        and v.mean_change is not None
        and past_threshold(v.mean_change, v.tflops_ratio, t) is not None
    ]
    if not moved:
        return []
    n = len(moved)
    summary = (
        f"ℹ️ {n} case{'s' if n > 1 else ''} past ±{t.mean_slowdown:.0%} against the stored "
        "baseline, not established as drift: information, not a warning"
    )
    items = [
        f"- {case_cell(v)}: {pct(v.mean_change)} against the baseline; A/B {ab_text(v)}"
        for v in moved
    ]
    return ["", f"<details><summary>{summary}</summary>", "", *items, "", "</details>"]


def _partial_text(v: CaseVerdict) -> str:
    """Why a case's model is partial and its structure alone against the reference (never
    a time); a whole case against a partial reference model: what that comparison says."""
    mine = v.current.model if v.current else None
    if mine is None or mine.status != "partial":
        return v.model.reason if v.model else ""
    if v.model is None or not structural_only(v.model):
        return mine.reason or ""
    return f"{mine.reason}; {structural_text(v.model)} against the reference"


def markdown_report(
    report: Report,
    *,
    full_matrix: bool = True,
    max_rows: int | None = None,
    pointer: str | None = None,
) -> str:
    """The PR comment / job summary body. ``full_matrix=False`` and ``max_rows`` shrink it
    (GitHub caps comments); then ``pointer`` says where the whole report is."""
    unit = report.thresholds.mean_slowdown
    parts = [_title(report), "", f"**{_summary_line(report)}**"]
    parts += _interpreted(report)
    parts += ["", f"**What to do:** {' '.join(_actions(report))}"]
    notes = _notes(report)
    if notes:
        parts += ["", *notes]
    if report.run_states:
        parts += ["", "#### The run", ""]
        parts += [
            f"- {VERDICT_ICONS[r.state]} `{r.state}`: {md_inline(short_shas(r.reason))}"
            for r in report.run_states
        ]
    if report.acceptance is not None:
        a = report.acceptance
        parts += [
            "",
            f"> 🤝 Accepted by @{md_inline(a.by)} for `{md_inline(a.head_sha[:12])}` with the "
            f"`{md_inline(a.label)}` label: a new push needs it again.",
        ]
    changed = _changed(report)
    if changed:
        title = "Changed by this PR" if report.mode in ("ab", "pr") else "Past a threshold"
        shown = changed if max_rows is None else changed[:max_rows]
        parts += ["", f"#### {title}", "", changed_table(shown, report.mode, unit)]
        if len(shown) < len(changed):
            parts += ["", f"… and {len(changed) - len(shown)} more."]
        parts += ["", f"<sub>{_legend(report.mode)} {bar_legend(unit)}.</sub>"]
    parts += _unchanged_line(report, changed)
    structural = [v for v in ordered(report.cases) if v.model and v.model.verdict == "structural"]
    if structural:
        shown = structural if max_rows is None else structural[:max_rows]
        parts += ["", "#### Structural (cost model, exact)", ""]
        parts += [  # chips named as chips ("on TPU 7")
            f"- {case_cell(v)}: {md_inline(chips_named(v.model.reason))}" for v in shown if v.model
        ]
    partial = [
        v
        for v in ordered(report.cases)
        if (v.current and v.current.model and v.current.model.status == "partial")
        or structural_only(v.model)
    ]
    if partial:  # issue 29: a partial model shows no modelled time, only why
        parts += ["", "#### Partial cost model (no modelled time, not judged)", ""]
        parts += [
            f"- {case_cell(v)}: {md_inline(_partial_text(v))}" for v in partial[: max_rows or None]
        ]
    drift = ordered([v for v in report.cases if STATE[v.verdict].listed == "drift"])
    if drift:
        shown = drift if max_rows is None else drift[:max_rows]
        parts += ["", "#### Drift since the baseline (not caused by this PR)", ""]
        parts += [drift_table(shown, unit)]
    parts += _information(report)
    parts += comment_section(ordered(report.cases))
    errors = [v for v in report.cases if STATE[v.verdict].listed == "errors"]
    if errors:
        shown = errors if max_rows is None else errors[:max_rows]
        parts += ["", "#### Errors", ""]
        parts += [f"- {case_cell(v)}: {md_inline(v.reason)}" for v in shown]
    inherited = [v for v in report.cases if STATE[v.verdict].listed == "inherited"]
    if inherited:  # issue 37: what the merge base already fails is not this PR's doing
        shown = inherited if max_rows is None else inherited[:max_rows]
        parts += ["", "#### Also failing at the merge base (not this PR)", ""]
        parts += [f"- {case_cell(v)}: {md_inline(v.reason)}" for v in shown]
        if len(shown) < len(inherited):
            parts += ["", f"… and {len(inherited) - len(shown)} more."]
    if full_matrix:
        parts += ["", f"<details><summary>All {case_count(len(report.cases))}</summary>", ""]
        parts += full_tables(report)
        parts += [footnotes(report), "", "</details>"]
    parts += [
        "",
        "<details><summary>Method</summary>",
        "",
        _method(report),
        "",
        "</details>",
    ]
    if pointer:
        parts += ["", pointer]
    parts += ["", *_footer(report)]
    return "\n".join(parts) + "\n"


def _method(report: Report) -> str:
    t = report.thresholds
    return (
        f"Past a threshold (mean time +{t.mean_slowdown:.0%}, TFLOPS −{t.tflops_drop:.0%}) "
        f"AND significant (p < {t.significance:g}, false-discovery controlled across the "
        "matrix) "
        + (
            "AND reproduced on re-measurement is a regression; "
            if report.mode != "baseline" or any(v.confirmed is not None for v in report.cases)
            else "is a regression (these cases were measured once: `ci-bench ci` and `ab` "
            "re-measure a flagged case before it is one); "
        )
        + (
            "in a PR report the A/B against the base decides, the stored baseline shows drift. "
            if report.mode == "pr"
            else ""
        )
        + _readme_link(report)
    )


def _readme_link(report: Report) -> str:
    """ci-bench's own documentation of the method, at the version that wrote the report."""
    url = docs_url("docs/VERDICTS.md", "verdicts-you-can-trust-method")
    return f"[How ci-bench decides]({url})."


def fit_markdown(report: Report, limit: int, where: str) -> str:
    """The largest rendering under ``limit`` characters: drop the full matrix, then rows."""
    body = markdown_report(report)
    if len(body) <= limit:
        return body
    pointer = f"The full matrix ({len(report.cases)} cases) did not fit here: see {where}."
    rows: int | None = None
    while True:
        body = markdown_report(report, full_matrix=False, max_rows=rows, pointer=pointer)
        if len(body) <= limit:
            return body
        if rows == 0:  # still too long (notes, run states): whole lines, and it says so
            tail = f"\n\n… cut to fit the comment: see {where}.\n"
            kept = body[: max(0, limit - len(tail) - 40)]
            kept = kept[: kept.rfind("\n")] if "\n" in kept else ""
            opened = kept.count("<details>") - kept.count("</details>")
            return kept + "\n\n</details>" * max(0, opened) + tail
        rows = len(report.cases) // 2 if rows is None else rows // 2
