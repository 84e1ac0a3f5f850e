"""``ci-bench ci`` and ``ci-bench comment``: what each GitHub event asks for, in order.

Order matters for "never lose a report": results are saved while measuring, then the report
files, the job summary and the step outputs are written, and only then is GitHub called.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ci_bench.commands.bench import Bench, confirmed, load_specs, measure, open_bench, remeasure
from ci_bench.commands.compare import baseline_report, baselines_folder, load_results
from ci_bench.commands.config import Config, load_config
from ci_bench.commands.request import Request, build_request
from ci_bench.commands.run import saver
from ci_bench.contract.spec import KernelSpec
from ci_bench.errors import ExitCode, InputError
from ci_bench.github.api import COMMENT_LIMIT, GitHubClient, GitHubError, marker
from ci_bench.github.context import ActionsContext, PullRequest, Release, WorkflowRun
from ci_bench.github.context import load_context as load_actions_context
from ci_bench.github.outputs import annotations, append_summary, report_outputs, write_outputs
from ci_bench.github.promote import promote_through_api
from ci_bench.report.comment import fit_markdown, markdown_report
from ci_bench.schema import REPORT_READABLE, Report, Results
from ci_bench.store.baselines import check_pins, check_promotable
from ci_bench.store.files import atomic_write_text, dump_model, read_json, read_model

ARTIFACT = "ci-bench-report"


def load_report(path: Path) -> Report:
    return read_model(path, Report, what="report", schema_version=REPORT_READABLE)


def api_client(context: ActionsContext, config: Config) -> GitHubClient:
    if not context.token:
        raise InputError("GITHUB_TOKEN is not set: cannot call the GitHub API")
    return GitHubClient(context.token, context.api_url, context.repository, config.github)


def check_release(release: Release, specs: Mapping[str, KernelSpec]) -> None:
    """A kernel tag must name a kernel whose SPEC declares the tagged version."""
    if release.kernel is None:
        return
    spec = specs.get(release.kernel)
    if spec is None:
        raise InputError(f"tag {release.tag}: no kernel named {release.kernel!r}")
    if spec.version != release.version:
        raise InputError(
            f"tag {release.tag}: kernel {spec.name} declares version {spec.version}, "
            f"not {release.version}; bump the kernel's SPEC before tagging"
        )


REPORT_FILES = {"baseline": "report", "ab": "ab-report", "pr": "report"}


def _publish_locally(
    report: Report, out_dir: Path, context: ActionsContext, out: TextIO, *, files_only: bool
) -> Path:
    """Report files, job summary, step outputs and annotations: nothing here needs the API."""
    stem = REPORT_FILES[report.mode]
    report_path = out_dir / f"{stem}.json"
    atomic_write_text(report_path, dump_model(report))
    atomic_write_text(out_dir / f"{stem}.md", markdown_report(report))
    if files_only:
        return report_path
    if context.step_summary:
        append_summary(context.step_summary, markdown_report(report))
    if context.output:
        prefix = "ab-" if report.mode == "ab" else ""
        values = report_outputs(report, report_path)
        write_outputs(context.output, {f"{prefix}{k}": v for k, v in values.items()})
    for line in annotations(report):
        out.write(line + "\n")
    return report_path


def _where(report: Report, context: ActionsContext) -> str:
    """The run that measured the report (a workflow_run commenter is another run)."""
    url = report.run_url or context.run_url
    run = f" of {url}" if url else ""
    return f"the job summary and the `{ARTIFACT}` artifact{run}"


def _footer(report: Report, context: ActionsContext, head_sha: str | None) -> str:
    """Which run measured which pull-request commit (not the merge commit)."""
    url, head = report.run_url or context.run_url, report.head_sha or head_sha
    parts = [f"[benchmark run]({url})"] if url else []
    if head:
        parts.append(f"pull request head `{head[:12]}`")
    return f"\n\n<sub>{' · '.join(parts)}</sub>\n" if parts else ""


def _comment(
    client: GitHubClient,
    number: int,
    workflow: str,
    report: Report,
    context: ActionsContext,
    head_sha: str | None = None,
) -> str:
    tag = marker(workflow, report.meta.device.identity, report.mode)
    footer = _footer(report, context, head_sha)
    body = fit_markdown(report, COMMENT_LIMIT - len(tag) - len(footer) - 1, _where(report, context))
    action, url = client.upsert_comment(number, tag, body.rstrip("\n") + footer)
    return f"{report.mode} comment {action}: {url}"


def combined_exit(codes: list[int]) -> int:
    """A failure anywhere fails; 'nothing measured' only when nothing failed."""
    for code in (ExitCode.FAILED, ExitCode.NOTHING_MEASURED, ExitCode.USAGE):
        if code in codes:
            return int(code)
    return int(ExitCode.OK)


def _reports(
    request: Request,
    specs: Mapping[str, KernelSpec],
    env: Mapping[str, str],
    results: Results | None,
    bench: Bench | None,
) -> list[Report]:
    """The report the mode asks for, confirmation passes included: baseline, A/B, or (both)
    ONE pull-request report where the A/B decides and the baseline diff shows drift."""
    from ci_bench.commands.ab import run_ab
    from ci_bench.judge.pr import pr_report

    reports: list[Report] = []
    if request.mode in ("baseline", "both"):
        assert results is not None

        def rejudge(ids: set[str]) -> Report:
            assert bench is not None
            assert results is not None
            (again,) = remeasure(bench, [specs], [results.cases], ids, bench.harness)
            updated = results.model_copy(update={"cases": again})
            atomic_write_text(request.out_dir / "results.json", dump_model(updated))
            return baseline_report(request, updated)

        # Judged from merged shard results: each shard ran its own confirmation pass, and a
        # case flagged only across the whole matrix was never re-measured.
        unconfirmable = request.confirm and bench is None
        first = baseline_report(request, results, require_confirmation=unconfirmable)
        reports.append(confirmed(first, rejudge, request.confirm and bench is not None))
    if request.mode in ("ab", "both"):
        if request.ab_report is not None:
            reports.append(load_report(request.ab_report))
        else:
            reports.append(run_ab(request, specs, env))
    if request.mode == "both":
        return [pr_report(reports[0], reports[1], request.policy)]
    return reports


def cmd_ci(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    context = load_actions_context(env)
    if isinstance(context.event, WorkflowRun):
        raise InputError("workflow_run events post comments: use `ci-bench comment --report-dir`")
    flags = vars(args)
    request = build_request(flags, load_config(flags.get("config"), cwd), context.event)
    specs = load_specs(request)
    if request.release is not None:
        check_release(request.release, specs)
    check_pins(baselines_folder(request), request.baselines.pins)  # before measuring
    out_dir = request.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    event = context.event
    if isinstance(event, PullRequest):
        pr = {"number": event.number, "head_sha": event.head_sha, "run_url": context.run_url}
        atomic_write_text(out_dir / "pr.json", json.dumps(pr) + "\n")
    results = bench = None
    if request.results_path:
        results = load_results(request.results_path)
    elif request.release is not None or request.mode != "ab":
        bench = open_bench(request, specs, env)
        results = measure(bench, saver(out_dir / "results.json"))
    if request.release is not None:
        assert results is not None
        return _release(request, context, results, out)

    head = event.head_sha if isinstance(event, PullRequest) else None
    reports = [
        r.model_copy(update={"head_sha": head, "run_url": context.run_url})
        for r in _reports(request, specs, env, results, bench)
    ]
    for report in reports:
        _publish_locally(report, out_dir, context, out, files_only=not request.publish)
        out.write(markdown_report(report) if not context.step_summary else report.headline + "\n")
    code = combined_exit([r.exit_code for r in reports])
    if isinstance(event, PullRequest) and request.comment:
        if event.from_fork or not context.token:
            why = "a fork's token is read-only" if event.from_fork else "no GITHUB_TOKEN"
            sys.stderr.write(f"ci-bench: comment left to the comment job ({why})\n")
            return code
        try:
            client = api_client(context, request.config)
            workflow = context.workflow or "ci-bench"
            for report in reports:
                message = _comment(client, event.number, workflow, report, context, event.head_sha)
                sys.stderr.write(f"ci-bench: {message}\n")
        except GitHubError as exc:
            sys.stderr.write(f"ci-bench: error: {exc} (the report is in {out_dir})\n")
            return code if code != ExitCode.OK else int(ExitCode.GITHUB)
    return code


def _repo_path(request: Request) -> str:
    """The baselines folder as a path inside the repository (the contents API's view)."""
    folder = request.baselines.folder.resolve()
    try:
        return folder.relative_to(request.config.root.resolve()).as_posix().strip("/")
    except ValueError:
        raise InputError(f"{folder}: the baselines folder must be inside the repository") from None


def _release(request: Request, context: ActionsContext, results: Results, out: TextIO) -> int:
    release = request.release
    assert release is not None
    check_promotable(results, str(request.out_dir / "results.json"))
    client = api_client(context, request.config)
    lines = promote_through_api(
        client, results, release.tag, _repo_path(request), request.promote_via
    )
    summary = "\n".join(f"- {line}" for line in lines) or "- nothing to promote"
    text = f"### ci-bench: baselines for {release.tag}\n\n{summary}\n"
    if context.step_summary:
        append_summary(context.step_summary, text)
    out.write(text)
    return 0


def cmd_comment(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    """Post the report artifact as the sticky comment: from the benchmark workflow's own
    ``comment`` job (pull_request_target), or from a workflow_run job, checking which PR
    the run belongs to."""
    context = load_actions_context(env)
    event = context.event
    if isinstance(event, PullRequest):
        return _comment_in_run(args, context, event, cwd, out)
    if not isinstance(event, WorkflowRun):
        raise InputError(
            "comment needs a pull_request_target or workflow_run event, "
            f"got {context.event_name or 'none'}"
        )
    reports = _artifact_reports(args.report_dir)
    if event.event != "pull_request":
        out.write(f"ci-bench: the run was a {event.event} event: no pull request to comment on\n")
        return 0
    client = api_client(context, load_config(None, cwd))
    number = _pull_number(args.report_dir, event, client)
    for report in reports:
        out.write(f"ci-bench: {_comment(client, number, event.name, report, context)}\n")
    return 0


def _artifact_reports(report_dir: Path) -> list[Report]:
    """The artifact's reports; the PR verdict alone when present (it already holds the A/B)."""
    paths = [report_dir / f"{stem}.json" for stem in dict.fromkeys(REPORT_FILES.values())]
    present = [p for p in paths if p.is_file()]
    if not present:
        raise InputError(f"{report_dir}: no report.json or ab-report.json in the artifact")
    reports = [load_report(p) for p in present]
    if any(r.mode == "pr" for r in reports):
        reports = [r for r in reports if r.mode == "pr"]
    return reports


def _comment_in_run(
    args: argparse.Namespace, context: ActionsContext, event: PullRequest, cwd: Path, out: TextIO
) -> int:
    """The benchmark workflow's own comment job: the number comes from GitHub's event."""
    reports = _artifact_reports(args.report_dir)
    client = api_client(context, load_config(None, cwd))
    workflow = context.workflow or "ci-bench"
    for report in reports:
        message = _comment(client, event.number, workflow, report, context, event.head_sha)
        out.write(f"ci-bench: {message}\n")
    return 0


def _pull_number(report_dir: Path, event: WorkflowRun, client: GitHubClient) -> int:
    """GitHub's own list first; a fork's run has none, so the artifact's number is checked.

    The artifact comes from pull-request code and is untrusted: its number counts only if
    that pull request's head is the commit the benchmark run measured.
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
