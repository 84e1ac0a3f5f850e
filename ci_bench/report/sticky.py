"""The one sticky pull-request comment, made of sections that different jobs write (pure).

The benchmark workflow writes the ``verdict`` section (the verdict, a failure, or "this
head needs the label"); the lowering relay writes the ``lowering`` section. Each job edits
only its own section and keeps the others as it found them, so one comment per pull
request carries everything, whatever job ran last. Sections are delimited by hidden
markers; a comment from an older ci-bench (no sections) is replaced whole.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from ci_bench.report.escape import md_id, md_inline, safe_url
from ci_bench.report.lowering_section import WHERE, lowering_lines, tiling_lines
from ci_bench.schema import Report, Results
from ci_bench.schema.analysis import Analysis
from ci_bench.schema.lowering import LoweringResults

__all__ = ["lowering_section", "tiling_lines"]

SECTIONS = ("verdict", "lowering")
# Each section's share of GitHub's 65,536 characters, the verdict's first: with the marker
# line (at most ~110 characters) and each section's hidden delimiter (~40), they always fit,
# so no section's size can keep another out of the comment.
BUDGETS = {"verdict": 50_000, "lowering": 14_000}
VERDICT_BUDGET = BUDGETS["verdict"]
LOWERING_BUDGET = BUDGETS["lowering"]
_SECTION = re.compile(
    r"<!-- ci-bench section: (\w+) -->\n(.*?)(?=<!-- ci-bench section: |\Z)", re.S
)


def sections_of(body: str | None) -> dict[str, str]:
    """The sections of an existing comment body (without its marker line)."""
    if not body:
        return {}
    return {m[1]: m[2].strip("\n") for m in _SECTION.finditer(body) if m[1] in SECTIONS}


# An absolute file path in a message (a traceback frame, a worker's last words): the
# runner's own layout (its interpreter's install path, its home) is nobody's business in a
# public comment. Not after a URL's scheme or host, a word, or an ellipsis already put.
_PATH = re.compile(r"(?<![\w.:/~…-])/(?:[^\s/\"'`|<>()\[\]\\,;]+/)+[^\s/\"'`|<>()\[\]\\,;]+")
_PACKAGES = re.compile(r"(?<=/)(?:site-packages|dist-packages|lib/python\d+(?:\.\d+)?)/")


def runner_paths_out(text: str) -> str:
    """``text`` with each absolute path cut to what names the file: past ``site-packages``
    (or the standard library's folder) when it is an installed module, else its last two
    parts (``…/ctypes/__init__.py``)."""

    def short(match: re.Match[str]) -> str:
        path = match[0]
        packages = list(_PACKAGES.finditer(path))
        if packages:
            return "…/" + path[packages[-1].end() :]
        return "…/" + "/".join(path.rsplit("/", 2)[-2:])

    return _PATH.sub(short, text)


def within_budget(name: str, text: str) -> str:
    """A section held to its budget: whole lines kept, open ``<details>`` closed, and a
    last line that says it was cut (each writer fits its own section first; this is for a
    section an older ci-bench, or a writer that did not, left too long)."""
    budget = BUDGETS[name]
    text = text.strip()
    if len(text) <= budget:
        return text
    tail = (
        f"\n\n<sub>… cut: this section passed its {budget:,}-character share of the "
        f"comment; the {name} job's summary has all of it.</sub>"
    )
    kept = text[: budget - len(tail) - 40]
    kept = kept[: kept.rfind("\n")] if "\n" in kept else kept
    kept += "\n\n</details>" * max(0, kept.count("<details>") - kept.count("</details>"))
    return kept + tail


def compose(existing: str | None, updates: Mapping[str, str]) -> str:
    """The comment body with ``updates`` (no runner paths in them) replacing their sections,
    the others kept; each section within its budget."""
    merged = {**sections_of(existing), **{k: runner_paths_out(v) for k, v in updates.items()}}
    parts = []
    for name in SECTIONS:
        if merged.get(name):
            text = within_budget(name, merged[name])
            parts.append(f"<!-- ci-bench section: {name} -->\n{text}\n")
    return "\n".join(parts)


def footer(run_url: str | None, head_sha: str | None) -> str:
    """Which run measured which pull-request commit, once."""
    url = safe_url(run_url)
    parts = [f"[benchmark run]({url})"] if url else []
    if head_sha:
        parts.append(f"pull request head `{md_inline(head_sha[:12])}`")
    return f"<sub>{' · '.join(parts)}</sub>" if parts else ""


def failure(
    head_sha: str | None,
    jobs: Mapping[str, str],
    errors: Sequence[str],
    run_url: str | None,
) -> str:
    """Nothing measured made it to a report: say so, why, and where to look."""
    head = f" for `{md_inline(head_sha[:12])}`" if head_sha else ""
    lines = [f"### 💥 ci-bench: benchmark failed{head}", ""]
    failed = [f"`{md_inline(name)}` {md_inline(result)}" for name, result in jobs.items()]
    if failed:
        lines += [f"**Jobs:** {', '.join(failed)}", ""]
    if errors:
        lines += ["**Why:**", ""]
        lines += [f"- {md_inline(e)}" for e in errors]
        lines.append("")
    url = safe_url(run_url)
    where = f"the [run's log]({url})" if url else "the run's log"
    lines.append(
        f"**What to do:** no verdict was reached for this commit: see {where}, fix the "
        "cause (often a kernel module that no longer imports) and push again, or re-run."
    )
    return "\n".join(lines)


def needs_label(head_sha: str, label: str, measured_before: bool) -> str:
    """A fork's new commit: nothing measured until a maintainer labels this exact commit."""
    earlier = (
        " The verdict below this line, if any, was for an earlier commit."
        if measured_before
        else ""
    )
    return (
        f"### ⏸️ ci-bench: `{md_inline(head_sha[:12])}` is not measured yet\n\n"
        f"**What to do:** a maintainer reads this commit and applies the `{md_inline(label)}` "
        f"label (remove it first if it is already on the pull request): a fork's code "
        f"reaches the benchmark runners only for the commit that was labelled.{earlier}"
    )


def waiting(head_sha: str | None, fork: bool, label: str) -> str:
    """The verdict section before any benchmark ran (the lowering relay came first)."""
    head = f"`{md_inline(head_sha[:12])}`" if head_sha else "this commit"
    if fork:
        return (
            f"### ⏸️ ci-bench: {head} is not measured yet\n\n"
            f"A maintainer's `{md_inline(label)}` label on this commit starts the benchmark."
        )
    return f"### ⏳ ci-bench: measuring {head}\n\nThe verdict replaces this line when it is in."


def stale_accept(label: str, old: str | None) -> str:
    """The accept label was for an earlier commit and was removed."""
    was = f" (it was for `{md_inline(old[:12])}`)" if old else ""
    return (
        f"> The `{md_inline(label)}` label was removed{was}: an acceptance holds for the "
        "commit it was given for; apply it again after reading the new commit."
    )


def older_run(run_head: str, now_head: str) -> str:
    """A run for an older head finished: its verdict is not this pull request's."""
    return (
        f"an older run for {run_head[:12]} finished; the PR is at {now_head[:12]}: "
        "its verdict is not posted"
    )


def moved_on(run_head: str, now_head: str, label: str) -> str:
    """A fork's labelled run ended after the pull request moved on to an unlabelled head."""
    return (
        f"### ⏸️ ci-bench: the PR moved on to `{md_inline(now_head[:12])}`: it needs the "
        f"label again\n\n"
        f"The run for `{md_inline(run_head[:12])}` finished after a new push; its verdict is "
        f"not this commit's. **What to do:** a maintainer reads "
        f"`{md_inline(now_head[:12])}` and applies the `{md_inline(label)}` label (remove it "
        "first if it is still on the pull request)."
    )


def base_failures(report: Report, max_rows: int = 10) -> str:
    """Cases whose merge-base kernel hung or crashed while the head was fine: the base's
    fault, said as such (the head was measured alone)."""
    rows = [
        f"- {md_id(c.id)}: {md_inline(c.reason or '')}"
        for c in report.cases
        if (c.reason or "").startswith("the merge base's kernel")
    ]
    if not rows:
        return ""
    more = [f"- … and {len(rows) - max_rows} more"] if len(rows) > max_rows else []
    head = "> **Not this PR's failure:** the merge base's kernel failed where the head did not:"
    return "\n".join([head, *rows[:max_rows], *more])


def label_not_removed(label: str, why: str) -> str:
    """Removing a stale accept label failed: the comment still tells the truth."""
    return (
        f"> The `{md_inline(label)}` label is for an earlier commit and could not be removed "
        f"({md_inline(why)}): it does not accept this commit; remove it by hand."
    )


def refused_accept(label: str, why: str) -> str:
    """An accept label that is no acceptance (like a refused approval); ``why`` says what
    to do, since that depends on the reason."""
    return (
        f"> The `{md_inline(label)}` label was not taken as an acceptance: {md_inline(why, 600)}."
    )


def withdrawn_accept(label: str, by: str) -> str:
    """An acceptance this run was given and the pull request no longer has: the label was
    removed while the run measured (or before a re-run)."""
    return (
        f"> The acceptance by @{md_inline(by)} was withdrawn: the `{md_inline(label)}` label "
        "was removed from the pull request while this run measured, so the verdict below is "
        "judged without it (a late run never brings back a withdrawn acceptance)."
    )


def withdrawn_notice(head_sha: str, label: str, measure_label: str) -> str:
    """A fork's accept label removed: its head is measured again only for a label, so the
    verdict that was up (accepted) no longer stands."""
    head = md_inline(head_sha[:12])
    return (
        f"### ⏸️ ci-bench: the acceptance of `{head}` was withdrawn\n\n"
        f"The `{md_inline(label)}` label was removed: the accepted verdict no longer stands. "
        f"**What to do:** a maintainer applies the `{md_inline(measure_label)}` label to judge "
        f"`{head}` again without it, or `{md_inline(label)}` to accept it again."
    )


def claimed(section: str) -> str:
    """The lowering section as the relay writes it: what the pull request's own code
    reported (a fork's workflow file and code can write anything into that artifact)."""
    head, _, rest = section.partition("\n")
    note = (
        "<sub>Reported by the pull request's own code (the `lower` workflow, no secrets): "
        "a claim, never the verdict.</sub>"
    )
    return f"{head}\n{note}\n{rest}"


_ACCEPTED = re.compile(r"^<!-- ci-bench acceptance: (\{[^\n]*\}) -->$", re.M)


def acceptance_note(label: str, by: str, head_sha: str, cases: Sequence[str]) -> str:
    """A hidden line of the verdict section: the acceptance the comment job checked against
    its own event, for the history record of the merge (``acceptance_in``)."""
    data = {"label": label, "by": by, "head_sha": head_sha, "cases": list(cases)}
    text = json.dumps(data, separators=(",", ":")).replace("--", "\\u002d\\u002d")
    return f"<!-- ci-bench acceptance: {text} -->"


def acceptance_in(body: str | None) -> dict[str, object] | None:
    """The acceptance a verdict section records (None: none, or unreadable)."""
    found = _ACCEPTED.search(sections_of(body).get("verdict", ""))
    if found is None:
        return None
    try:
        data = json.loads(found[1])
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def lowering_section(
    lowering: LoweringResults | None,
    smoke: Results | None,
    head_sha: str | None,
    run_url: str | None,
    max_rows: int | None = 10,
    analysis: Analysis | None = None,
    tune_hint: float = 0.0,
    *,
    claim: bool = False,
    budget: int | None = LOWERING_BUDGET,
    where: str = WHERE,
) -> str:
    """The lowering job's section: every case lowered for TPU (and fitting VMEM), the cost
    model against the merge base, the smoke profile correct, and (``tune_hint`` > 0) the
    tilings the model finds faster than the shipped one by more than that ratio. ``claim``:
    as the relay writes it (the pull request's code reported it). Its lists shrink until
    it fits ``budget`` (None: every row, for the job summary)."""
    foot = footer(run_url, head_sha).replace("benchmark run", "lowering run")
    rows = None if budget is None else max_rows
    while True:
        lines = lowering_lines(
            lowering, smoke, analysis, tune_hint=tune_hint, max_rows=rows, where=where
        )
        text = "\n".join([*lines, "", foot])
        if claim:
            text = claimed(text)
        if budget is None or len(text) <= budget or not rows:
            return text
        rows //= 2
