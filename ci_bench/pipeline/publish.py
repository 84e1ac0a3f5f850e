"""Publishing: report files, the job summary, step outputs, annotations, the sticky comment.

Order matters for "never lose a report": files first, then the job summary, outputs and
annotations (each on its own: a broken summary file never stops the outputs), and only
then GitHub. The comment is ONE per pull request (the marker names the workflow and the
PR): the verdict, or why there is none (every shard failed), or that a fork's new commit
needs the label; a lowering relay writes its own section of the same comment.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ci_bench.errors import CiBenchError, InputError
from ci_bench.github.api import GitHubClient, GitHubError
from ci_bench.github.context import ActionsContext, PullRequest, WorkflowRun
from ci_bench.github.markers import legacy_marker, marker
from ci_bench.github.outputs import annotations, append_summary, report_outputs, write_outputs
from ci_bench.pipeline.config import Config
from ci_bench.pipeline.current import against_now
from ci_bench.pipeline.judging import load_report, withdrawn
from ci_bench.pipeline.plan import ACCEPT_LABEL, MEASURE_LABEL, Gate
from ci_bench.report.comment import fit_markdown, markdown_report
from ci_bench.report.sticky import (
    VERDICT_BUDGET,
    acceptance_note,
    base_failures,
    compose,
    failure,
    footer,
    label_not_removed,
    needs_label,
    refused_accept,
    sections_of,
    stale_accept,
    withdrawn_accept,
    withdrawn_notice,
)
from ci_bench.schema import Report
from ci_bench.schema.status import RoleStatus
from ci_bench.store.files import atomic_write_text, dump_model, read_json, read_model
from ci_bench.text import one_line

ARTIFACT = "ci-bench-report"
REPORT_FILES = {"baseline": "report", "ab": "ab-report", "pr": "report"}


def api_client(context: ActionsContext, config: Config) -> GitHubClient:
    if not context.token:
        raise InputError("GITHUB_TOKEN is not set: cannot call the GitHub API")
    return GitHubClient(context.token, context.api_url, context.repository, config.github)


def comment_key(config: Config) -> str:
    """The workflow family the sticky comment belongs to (its marker)."""
    return config.github.comment_key


def write_report_files(report: Report, out_dir: Path, stem: str | None = None) -> Path:
    stem = stem or REPORT_FILES[report.mode]
    path = out_dir / f"{stem}.json"
    atomic_write_text(path, dump_model(report))
    atomic_write_text(out_dir / f"{stem}.md", markdown_report(report))
    return path


def publish_locally(report: Report, path: Path, context: ActionsContext, out: TextIO) -> None:
    """Job summary, step outputs and annotations: nothing here needs the API, and each is
    written even when another fails (the first failure is raised after all were tried)."""
    failures: list[str] = []
    if context.output:
        try:
            write_outputs(context.output, report_outputs(report, path))
        except (OSError, CiBenchError) as exc:
            failures.append(f"GITHUB_OUTPUT {context.output}: {one_line(str(exc))}")
    # Commands on purpose, escaped where built: past the output edge's own escaping.
    emit = getattr(out, "write_command", out.write)
    for line in annotations(report):
        emit(line + "\n")
    if context.step_summary:
        try:
            append_summary(context.step_summary, markdown_report(report))
        except (OSError, CiBenchError) as exc:
            failures.append(f"GITHUB_STEP_SUMMARY {context.step_summary}: {one_line(str(exc))}")
    if failures:
        raise InputError("; ".join(failures) + f" (the report is in {path})")


def write_status(out_dir: Path, status: RoleStatus) -> None:
    name = f"status-{status.role}" + (f"-{status.shard.split('/')[0]}" if status.shard else "")
    atomic_write_text(out_dir / f"{name}.json", dump_model(status))


def read_statuses(folder: Path) -> list[RoleStatus]:
    """Every role status file under ``folder`` (the downloaded artifacts), oldest first."""
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.rglob("status-*.json")):
        try:
            found.append(read_model(path, RoleStatus, what="status", schema_version=1))
        except InputError as exc:  # an unreadable status still says something failed
            sys.stderr.write(f"ci-bench: {exc}\n")
    return found


def verdict_section(report: Report, run_url: str | None, room: int = VERDICT_BUDGET) -> str:
    """The report as the comment's verdict section, cut to fit its budget (``room``)."""
    where = f"the job summary and the `{ARTIFACT}` artifact"
    url = report.run_url or run_url
    if url:
        where += f" of {url}"
    note = base_failures(report)
    text = fit_markdown(report, room - (len(note) + 2 if note else 0), where)
    if not note:
        return text
    heading, _, rest = text.partition("\n\n")
    return f"{heading}\n\n{note}\n\n{rest}"


def verdict_text(report: Report, run_url: str | None, room: int = VERDICT_BUDGET) -> str:
    """The verdict section as the comment job posts it (and ``preview`` shows it): the
    report, and the hidden record of an acceptance (checked against this run's event)."""
    given = report.acceptance
    note = ""
    if given is not None:
        cases = [c.id for c in report.cases if c.verdict == "accepted"]
        note = "\n" + acceptance_note(given.label, given.by, given.head_sha, cases)
    return verdict_section(report, run_url, room - len(note)) + note


def _jobs(env: Mapping[str, str]) -> dict[str, str]:
    """The needed jobs' results (``toJSON(needs)`` in CI_BENCH_JOBS), e.g. measure: failure."""
    text = env.get("CI_BENCH_JOBS")
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        raise InputError("CI_BENCH_JOBS: not the JSON of the workflow's needs context") from None
    if not isinstance(data, dict):
        raise InputError("CI_BENCH_JOBS: not the JSON of the workflow's needs context")
    return {
        str(name): str(job.get("result"))
        for name, job in data.items()
        if isinstance(job, dict) and name != "plan"
    }


@dataclass(frozen=True)
class Posted:
    """What the comment job did, and the verdict it posted when that is not the report
    job's: an acceptance withdrawn while the run measured (the job then fails as that
    verdict does, so a green check never stands for a withdrawn acceptance)."""

    message: str | None
    rejudged: Report | None = None


def comment_role(
    gate: Gate,
    context: ActionsContext,
    config: Config,
    report_dir: Path,
    env: Mapping[str, str],
    out: TextIO,
) -> Posted:
    """The comment job: the verdict, the failure, or the fork's notice, in ONE comment.

    Runs no pull-request code: the report artifact is read as data (schema-validated, its
    head checked against the event's) and re-rendered. What it writes is about the pull
    request as it is now (one ``GET /pulls/N``): its head, and whether the accept label this
    run was given is still on it.
    """
    event = context.event
    if not isinstance(event, PullRequest):
        raise InputError(f"comment needs a pull request event, got {context.event_name or 'none'}")
    # The artifact is checked before any API call: a crafted one is refused as such.
    report = _checked_report(report_dir, gate, event) if gate.notice is None else None
    client = api_client(context, config)
    tag, legacy = marker(comment_key(config), event.number), legacy_marker(comment_key(config))
    pull = client.pull_now(event.number)
    now = against_now(
        event.head_sha,
        pull.head_sha,
        fork=event.from_fork,
        measured=gate.report,
        label=MEASURE_LABEL,
    )
    if not now.current:
        if now.section is None:
            return Posted(now.line)
        text = now.section + "\n\n" + footer(context.run_url, None)
        done = write_verdict(client, event.number, tag, legacy, text, unless=pull.head_sha)
        return Posted(f"{now.line}; {done}")
    notes = []
    if gate.refused:
        notes.append(refused_accept(ACCEPT_LABEL, gate.refused))
    # An acceptance holds for the commit it was given for.
    if event.action == "synchronize" and ACCEPT_LABEL in pull.labels:
        try:
            if client.remove_label(event.number, ACCEPT_LABEL):
                notes.append(stale_accept(ACCEPT_LABEL, None))
        except GitHubError as exc:  # the verdict still goes up, saying so
            notes.append(label_not_removed(ACCEPT_LABEL, str(exc)))
    rejudged = None
    if report is not None and report.acceptance and report.acceptance.label not in pull.labels:
        given = report.acceptance  # removed while this run measured: never posted as given
        report = rejudged = withdrawn(report)
        notes.append(withdrawn_accept(given.label, given.by))
    room = VERDICT_BUDGET - sum(len(n) + 2 for n in notes)
    section = _comment_body(
        gate, context, report_dir, report, env, client, tag, legacy, event, room
    )
    if section is None:
        return Posted(None)
    text = "\n\n".join([*notes, section])
    return Posted(write_verdict(client, event.number, tag, legacy, text), rejudged)


def write_verdict(
    client: GitHubClient,
    number: int,
    tag: str,
    legacy: str,
    text: str,
    *,
    unless: str | None = None,
) -> str:
    """The verdict section replaced (the others kept); an unchanged text is no edit.
    ``unless``: a head whose verdict, already up, must stay (a newer run's)."""

    def body(old: str | None) -> str:
        up = sections_of(old).get("verdict", "")
        if unless and f"`{unless[:12]}`" in up:
            return compose(old, {})
        return compose(old, {"verdict": text})

    action, url = client.upsert_comment(number, tag, body, legacy=legacy)
    return f"comment {action}: {url}"


def _checked_report(report_dir: Path, gate: Gate, event: PullRequest) -> Report | None:
    """This run's report artifact, if any: schema-valid, for the event's head, with the
    acceptance this run's plan decided (else an InputError: not commenting)."""
    path = next(
        (
            p
            for p in (report_dir / "report.json", report_dir / ARTIFACT / "report.json")
            if p.is_file()
        ),
        None,
    )
    if path is None:
        return None

    report = load_report(path)
    if report.head_sha and report.head_sha != event.head_sha:
        raise InputError(
            f"{path}: the report is for {report.head_sha[:12]}, this run is for "
            f"{event.head_sha[:12]}; not commenting"
        )
    _check_acceptance(report, gate, path)
    return report


def _comment_body(
    gate: Gate,
    context: ActionsContext,
    report_dir: Path,
    report: Report | None,
    env: Mapping[str, str],
    client: GitHubClient,
    tag: str,
    legacy: str,
    event: PullRequest,
    room: int,
) -> str | None:
    if gate.notice is not None:
        if client.find_comment(event.number, tag, legacy) is None:
            return None  # nothing measured before: no comment to correct
        notice = (
            withdrawn_notice(event.head_sha, ACCEPT_LABEL, MEASURE_LABEL)
            if gate.notice == "withdrawn"
            else needs_label(event.head_sha, MEASURE_LABEL, measured_before=True)
        )
        return notice + "\n\n" + footer(context.run_url, None)
    if report is not None:
        report = report.model_copy(update={"head_sha": event.head_sha, "run_url": context.run_url})
        return verdict_text(report, context.run_url, room)
    if not gate.report:
        return None
    jobs = {
        name: result for name, result in _jobs(env).items() if result in ("failure", "cancelled")
    }
    errors = [
        f"{s.role}{f' {s.shard}' if s.shard else ''}: {s.error}"
        for s in read_statuses(report_dir)
        if s.error
    ]
    text = failure(event.head_sha, jobs, errors, context.run_url)
    return text + "\n\n" + footer(context.run_url, event.head_sha)


def _check_acceptance(report: Report, gate: Gate, path: Path) -> None:
    """Who accepted which head comes from this run's plan (the event), never from the
    artifact: pull-request code wrote the report, and could claim a maintainer's word."""
    claimed = report.acceptance is not None or any(
        c.verdict == "accepted"
        or c.memory_verdict == "accepted"
        or (c.model is not None and c.model.verdict == "accepted")
        for c in report.cases
    )
    if report.acceptance != gate.acceptance or (claimed and gate.acceptance is None):
        given = gate.acceptance
        said = f"{given.label} by @{given.by}" if given else "no acceptance"
        raise InputError(
            f"{path}: the report's acceptance is not the one this run's event gave ({said}); "
            "not commenting"
        )


def pull_number(report_dir: Path, event: WorkflowRun, client: GitHubClient) -> int:
    """GitHub's own list first; a fork's run has none, so the artifact's number is checked.

    The artifact comes from pull-request code and is untrusted: its number counts only if
    that pull request's head is the commit the run measured.
    """
    if event.pull_numbers:
        return event.pull_numbers[0]
    path = report_dir / "pr.json"
    data = read_json(path, "pull request")
    number = data.get("number") if isinstance(data, dict) else None
    if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 2**31:
        raise InputError(f"{path}: number: not a pull request number: {str(number)[:40]!r}")
    head = client.pull_head_sha(number)
    if head != event.head_sha:
        raise InputError(
            f"{path}: pull request #{number} is at {head[:12]}, not the measured "
            f"{event.head_sha[:12]}; not commenting"
        )
    return number
