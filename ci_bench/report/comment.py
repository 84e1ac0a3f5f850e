"""The PR comment and job summary: a verdict a reviewer reads in ten seconds (pure).

Layout, top to bottom: the verdict and what to do about it; what THIS pull request changed
(the A/B in a PR report; the cases past a threshold otherwise); drift since the baseline;
errors; then, collapsed, every case with all its numbers and footnotes, and the method in
one line. The visible tables have three or four narrow columns so the verdict stays on
screen at a GitHub comment's width.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tabulate import tabulate

from ci_bench import docs_url
from ci_bench.report.escape import md_id, md_inline, safe_url
from ci_bench.report.render import VERDICT_ICONS, delta_chart, fmt_ms, fmt_util, ordered
from ci_bench.schema import STATE, CaseVerdict, KernelSummary, Report

# States a reviewer should see above the fold, besides drift (which has its own section).
CHANGED = ("regression", "improved", "noisy", "toolchain")


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1%}"


def _ab_cell(v: CaseVerdict) -> str:
    """The paired head/base change with its 95 % interval."""
    if v.ratio is None:
        return "–"
    if v.ratio_low is None or v.ratio_high is None:
        return _pct(v.ratio - 1)
    return f"{v.ratio - 1:+.1%} [{v.ratio_low - 1:+.1%}, {v.ratio_high - 1:+.1%}]"


def _verdict_cell(v: CaseVerdict) -> str:
    label = f"{VERDICT_ICONS[v.verdict]} {v.verdict}"
    if v.confirmed is True:
        label += ", confirmed"
    elif v.confirmed is False:
        label += ", not reproduced"
    elif v.min_repeats is not None:
        label += f", needs ≥{v.min_repeats} repeats"
    elif v.p_value is not None and v.verdict not in ("pass", "drift"):
        label += f" (p={v.p_value:.2g})"
    if v.memory_verdict == "regression":
        label = f"❌ memory +{(v.memory_change or 0):.0%}; {label}"
    return label


def _case_cell(v: CaseVerdict) -> str:
    return md_id(v.id)


def model_cell(v: CaseVerdict) -> str:
    """The cost model's change on the chip that moved most, compactly: ``–`` without a
    model, ``+1.2%`` within the threshold, ``📐 +97% v5e`` structural."""
    m = v.model
    if m is None or m.time_change is None:
        return "–"
    change = f"{m.time_change:+.0%}" if abs(m.time_change) >= 0.1 else f"{m.time_change:+.1%}"
    chip = f" {md_inline(m.chip)}" if m.chip else ""
    icon = {"structural": "📐 ", "improved": "🚀 ", "accepted": "🤝 "}.get(m.verdict, "")
    return f"{icon}{change}{chip if icon else ''}"


def _has_model(cases: Sequence[CaseVerdict]) -> bool:
    return any(v.model is not None for v in cases)


def _table(headers: Sequence[str], rows: list[list[str]]) -> str:
    return tabulate(rows, headers=list(headers), tablefmt="github", disable_numparse=True)


def _changed_table(cases: list[CaseVerdict], mode: str) -> str:
    if mode == "pr":
        headers = ["case", "Δ vs base (A/B)¹", "Δ vs baseline²"]
        rows = [[_case_cell(v), _ab_cell(v), _pct(v.mean_change)] for v in cases]
    elif mode == "ab":
        headers = ["case", "Δ vs base (A/B)¹"]
        rows = [[_case_cell(v), _ab_cell(v)] for v in cases]
    else:
        headers = ["case", "Δ vs baseline²"]
        rows = [[_case_cell(v), _pct(v.mean_change)] for v in cases]
    if _has_model(cases):
        headers.append("model⁵")
        rows = [[*row, model_cell(v)] for row, v in zip(rows, cases, strict=True)]
    headers.append("verdict")
    rows = [[*row, _verdict_cell(v)] for row, v in zip(rows, cases, strict=True)]
    return _table(headers, rows)


def _full_table(cases: list[CaseVerdict], mode: str) -> str:
    headers = ["case", "Pallas ms", "TFLOPS", "MFU / HBM³", "Δ vs baseline²"]
    if mode != "baseline":
        headers.append("Δ vs base (A/B)¹")
    headers.append("MDC⁴")
    if _has_model(cases):
        headers.append("model⁵")
    headers.append("verdict")
    rows = []
    for v in cases:
        cur = v.current
        util = fmt_util(cur.metrics if cur else None)
        row = [
            _case_cell(v),
            fmt_ms(cur.pallas.mean_ms if cur and cur.pallas else None),
            "–" if not cur or cur.tflops is None else f"{cur.tflops:.4g}",
            util,
            _pct(v.mean_change),
        ]
        if mode != "baseline":
            row.append(_ab_cell(v))
        mdc = "–" if v.mdc is None else f"±{v.mdc:.1%}"
        if v.min_repeats is not None:
            mdc = f"needs ≥{v.min_repeats} repeats"
        row.append(mdc)
        if _has_model(cases):
            row.append(model_cell(v))
        row.append(_verdict_cell(v))
        rows.append(row)
    return _table(headers, rows)


_AB_NOTE = (
    "¹ Δ vs base: head against the merge base of the PR, measured in the same job round by "
    "round; the median paired time ratio − 1, with its 95 % bootstrap interval."
)
_OTHER_NOTES = (
    "² Δ vs baseline: mean time against the stored baseline of the kernel's version "
    "(the specification's ±5 % rule).",
    "³ MFU for compute-bound cases, HBM bandwidth utilisation for memory-bound ones "
    "(– where the device's peak is unknown, e.g. CPUs).",
    "⁴ MDC: the smallest change this comparison would detect (80 % power); a pass rules "
    "out larger changes, not smaller ones.",
)
_MODEL_NOTE = (
    "⁵ model: the modelled TPU time read from the Pallas grid (HBM bytes, grid steps, VMEM; "
    "exact, the same on every machine) against the same reference, on the target chip "
    "that moved most; 📐 past the threshold."
)


def footnotes(mode: str, model: bool = False) -> str:
    """The full table's footnotes; the A/B's only where there is an A/B column, the
    model's only where there is a model column."""
    notes = ([_AB_NOTE] if mode != "baseline" else []) + list(_OTHER_NOTES)
    return "  \n".join(notes + ([_MODEL_NOTE] if model else []))


# What a run-level state means in a headline.
_RUN_TITLES = {
    "ab-missing": "the A/B against the base is missing",
    "unfinished": "the measurement did not finish",
}


def _summary_line(report: Report) -> str:
    counts = [f"{n} {state}" for state, n in report.counts.items() if state in STATE]
    if report.counts.get("memory-regression"):
        counts.insert(0, f"{report.counts['memory-regression']} memory regression")
    return f"{' · '.join(counts) or 'no cases'} — {len(report.cases)} cases"


def _title(report: Report) -> str:
    icon = VERDICT_ICONS[report.verdict]
    n = report.counts.get("regression", 0)
    if report.verdict in _RUN_TITLES:
        return f"### {icon} ci-bench: {_RUN_TITLES[report.verdict]}"
    structural = report.counts.get("model-structural", 0)
    if n and report.mode == "pr":
        what = f"this PR makes {n} case{'s' if n > 1 else ''} slower"
    elif n:
        what = f"{n} regression{'s' if n > 1 else ''}"
    elif report.verdict == "structural":
        what = f"{structural} case{'s' if structural > 1 else ''} slower on TPU by the cost model"
    elif report.verdict == "pass" or report.verdict in ("improved", "new", "drift"):
        what = "no slowdown from this PR" if report.mode == "pr" else "no regression"
    else:
        what = report.verdict
    return f"### {icon} ci-bench: {what}"


def _actions(report: Report) -> list[str]:
    present = [s for s in STATE.values() if report.counts.get(s.name) and s.action]
    if report.counts.get("memory-regression"):
        present.insert(0, STATE["regression"])
    seen: list[str] = []
    for state in present:
        if state.action not in seen:
            seen.append(state.action)
    return seen[:3] or ["Nothing to do."]


def _notes(kernels: Sequence[KernelSummary]) -> list[str]:
    notes = [f"> {md_inline(k.kernel)}: {md_inline(k.note)}" for k in kernels if k.note]
    notes += [f"> ⚠️ {md_inline(w)}" for k in kernels for w in k.warnings]
    return notes


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
        lines.append(f"A/B base: {md_inline(report.base_ref)}")
    lines += [
        f"Baseline: {md_inline(_provenance(k))}" for k in report.kernels if report.mode != "ab"
    ]
    return [f"<sub>{line}</sub><br>" for line in lines]


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


def markdown_report(
    report: Report,
    *,
    full_matrix: bool = True,
    max_rows: int | None = None,
    pointer: str | None = None,
) -> str:
    """The PR comment / job summary body. ``full_matrix=False`` and ``max_rows`` shrink it
    (GitHub caps comments); then ``pointer`` says where the whole report is."""
    parts = [_title(report), "", f"**{_summary_line(report)}**", ""]
    parts += [f"**What to do:** {' '.join(_actions(report))}"]
    notes = _notes(report.kernels)
    if notes:
        parts += ["", *notes]
    if report.run_states:
        parts += ["", "#### The run", ""]
        parts += [
            f"- {VERDICT_ICONS[r.state]} `{r.state}`: {md_inline(r.reason)}"
            for r in report.run_states
        ]
    if report.acceptance is not None:
        a = report.acceptance
        parts += [
            "",
            f"> 🤝 Accepted by @{md_inline(a.by)} for `{md_inline(a.head_sha[:12])}` with the "
            f"`{md_inline(a.label)}` label: a new push needs it again.",
        ]
    changed = ordered(
        [
            v
            for v in report.cases
            if v.verdict in CHANGED
            or (v.model is not None and v.model.verdict in ("structural", "accepted"))
        ]
    )
    memory = [
        v for v in ordered(report.cases) if v.memory_verdict == "regression" and v not in changed
    ]
    changed = ordered(changed + memory)
    if changed:
        title = "Changed by this PR" if report.mode in ("ab", "pr") else "Past a threshold"
        shown = changed if max_rows is None else changed[:max_rows]
        parts += ["", f"#### {title}", "", _changed_table(shown, report.mode)]
        if len(shown) < len(changed):
            parts += ["", f"… and {len(changed) - len(shown)} more."]
    structural = [v for v in ordered(report.cases) if v.model and v.model.verdict == "structural"]
    if structural:
        shown = structural if max_rows is None else structural[:max_rows]
        parts += ["", "#### Structural (cost model, exact)", ""]
        parts += [f"- {_case_cell(v)}: {md_inline(v.model.reason)}" for v in shown if v.model]
    drift = ordered([v for v in report.cases if v.verdict == "drift"])
    if drift:
        shown = drift if max_rows is None else drift[:max_rows]
        parts += ["", "#### Drift since the baseline (not caused by this PR)", ""]
        parts += [_changed_table(shown, "pr")]
    errors = [v for v in report.cases if v.verdict in ("error", "unmeasured")]
    if errors:
        shown = errors if max_rows is None else errors[:max_rows]
        parts += ["", "#### Errors", ""]
        parts += [f"- {_case_cell(v)}: {md_inline(v.reason)}" for v in shown]
    if full_matrix:
        everything = ordered(report.cases)
        parts += [
            "",
            f"<details><summary>All {len(everything)} cases</summary>",
            "",
            _full_table(everything, report.mode),
            "",
            footnotes(report.mode, _has_model(report.cases)),
        ]
        chart = delta_chart(report)
        if chart:
            parts += ["", chart.rstrip("\n")]
        parts += ["", "</details>"]
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
        "matrix) AND reproduced on re-measurement is a regression; "
        + (
            "in a PR report the A/B against the base decides, the stored baseline shows drift. "
            if report.mode == "pr"
            else ""
        )
        + _readme_link(report)
    )


def _readme_link(report: Report) -> str:
    """ci-bench's own documentation of the method, at the version that wrote the report."""
    return f"[How ci-bench decides]({docs_url('README.md', 'verdicts-you-can-trust-method')})."


def fit_markdown(report: Report, limit: int, where: str) -> str:
    """The largest rendering under ``limit`` characters: drop the full matrix, then rows."""
    body = markdown_report(report)
    if len(body) <= limit:
        return body
    pointer = f"The full matrix ({len(report.cases)} cases) did not fit here: see {where}."
    rows: int | None = None
    while True:
        body = markdown_report(report, full_matrix=False, max_rows=rows, pointer=pointer)
        if len(body) <= limit or rows == 0:
            return body[:limit]
        rows = len(report.cases) // 2 if rows is None else rows // 2
