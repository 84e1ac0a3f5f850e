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

from ci_bench.cli_compare import baselines_dir, load_results, lookups_for, parse_fail_on
from ci_bench.cli_run import load_project, measure
from ci_bench.compare import compare
from ci_bench.config import Config
from ci_bench.errors import ExitCode, InputError
from ci_bench.gh_api import COMMENT_LIMIT, ApiSettings, GitHubClient, GitHubError, marker
from ci_bench.gh_context import ActionsContext, Dispatch, PullRequest, Release, WorkflowRun
from ci_bench.gh_context import load_context as load_actions_context
from ci_bench.gh_outputs import annotations, append_summary, report_outputs, write_outputs
from ci_bench.io import atomic_write_text, dump_model, read_model
from ci_bench.promote_remote import promote_through_api
from ci_bench.render import fit_markdown, markdown_report
from ci_bench.schema import REPORT_SCHEMA_VERSION, Report, Results
from ci_bench.spec import KernelSpec

ARTIFACT = "ci-bench-report"


def api_client(context: ActionsContext, config: Config) -> GitHubClient:
    if not context.token:
        raise InputError("GITHUB_TOKEN is not set: cannot call the GitHub API")
    g = config.github
    settings = ApiSettings(
        retries=g.retries,
        backoff=g.backoff,
        max_rate_limit_wait=g.max_rate_limit_wait,
        seconds_between_requests=g.seconds_between_requests,
        seconds_between_writes=g.seconds_between_writes,
    )
    return GitHubClient(context.token, context.api_url, context.repository, settings)


def _apply_event(
    args: argparse.Namespace,
    context: ActionsContext,
    config: Config,
    specs: Mapping[str, KernelSpec],
) -> None:
    """Event inputs fill the selection; command-line flags win where both are given."""
    event = context.event
    args.shape, args.dtype = None, "bfloat16"
    if isinstance(event, PullRequest):
        args.profile = args.profile or config.pr_profile
    elif isinstance(event, Dispatch):
        args.kernel = args.kernel or event.kernels
        args.case = args.case or event.cases
        args.profile = args.profile or event.profile
        args.repeats = args.repeats if args.repeats is not None else event.repeats
        args.fail_on = args.fail_on or event.fail_on
        args.baseline_version = event.baseline_version
    elif isinstance(event, Release):
        args.profile = args.profile or config.release_profile
        if event.kernel is not None:
            spec = specs.get(event.kernel)
            if spec is None:
                raise InputError(f"tag {event.tag}: no kernel named {event.kernel!r}")
            if spec.version != event.version:
                raise InputError(
                    f"tag {event.tag}: kernel {spec.name} declares version {spec.version}, "
                    f"not {event.version}; bump the kernel's SPEC before tagging"
                )
            args.kernel = [event.kernel]
    args.baseline_version = getattr(args, "baseline_version", None)
    args.baseline = []


def _report(args: argparse.Namespace, config: Config, results: Results) -> Report:
    lookups = lookups_for(results, baselines_dir(args, config), [], args.baseline_version)
    return compare(results, lookups, config.thresholds, parse_fail_on(args.fail_on, config.fail_on))


def _publish_locally(report: Report, out_dir: Path, context: ActionsContext, out: TextIO) -> Path:
    """Report files, job summary, step outputs and annotations: nothing here needs the API."""
    report_path = out_dir / "report.json"
    atomic_write_text(report_path, dump_model(report))
    atomic_write_text(out_dir / "report.md", markdown_report(report))
    if context.step_summary:
        append_summary(context.step_summary, markdown_report(report))
    if context.output:
        write_outputs(context.output, report_outputs(report, report_path))
    for line in annotations(report):
        out.write(line + "\n")
    return report_path


def _where(context: ActionsContext) -> str:
    run = f" of {context.run_url}" if context.run_url else ""
    return f"the job summary and the `{ARTIFACT}` artifact{run}"


def _comment(
    client: GitHubClient, number: int, workflow: str, report: Report, context: ActionsContext
) -> str:
    tag = marker(workflow, report.meta.device.identity)
    body = fit_markdown(report, COMMENT_LIMIT - len(tag) - 1, _where(context))
    action, url = client.upsert_comment(number, tag, body)
    return f"comment {action}: {url}"


def cmd_ci(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    context = load_actions_context(env)
    if isinstance(context.event, WorkflowRun):
        raise InputError("workflow_run events post comments: use `ci-bench comment --report-dir`")
    config, specs = load_project(args, cwd)
    _apply_event(args, context, config, specs)
    out_dir: Path = args.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    if args.results:
        results = load_results(args.results)
    else:
        args.output = out_dir / "results.json"
        results = measure(args, config, specs, env)
    if isinstance(context.event, PullRequest):
        pr = {"number": context.event.number, "head_sha": context.event.head_sha}
        atomic_write_text(out_dir / "pr.json", json.dumps(pr) + "\n")

    if isinstance(context.event, Release):
        return _release(args, config, context, results, out)

    report = _report(args, config, results)
    _publish_locally(report, out_dir, context, out)
    out.write(markdown_report(report) if not context.step_summary else report.headline + "\n")
    code = report.exit_code
    event = context.event
    if isinstance(event, PullRequest) and not args.no_comment:
        if event.from_fork or not context.token:
            why = "a fork's token is read-only" if event.from_fork else "no GITHUB_TOKEN"
            sys.stderr.write(f"ci-bench: comment left to the workflow_run job ({why})\n")
        else:
            try:
                workflow = context.workflow or "ci-bench"
                message = _comment(
                    api_client(context, config), event.number, workflow, report, context
                )
                sys.stderr.write(f"ci-bench: {message}\n")
            except GitHubError as exc:
                sys.stderr.write(f"ci-bench: error: {exc} (the report is in {out_dir})\n")
                return code if code != ExitCode.OK else int(ExitCode.GITHUB)
    return code


def _release(
    args: argparse.Namespace,
    config: Config,
    context: ActionsContext,
    results: Results,
    out: TextIO,
) -> int:
    from ci_bench.baselines import check_promotable

    assert isinstance(context.event, Release)
    check_promotable(results, str(args.out_dir / "results.json"))
    via = args.promote_via or config.promote_via
    client = api_client(context, config)
    folder = str(config.baselines_dir).strip("/")
    lines = promote_through_api(client, results, context.event.tag, folder, via)
    summary = "\n".join(f"- {line}" for line in lines) or "- nothing to promote"
    text = f"### ci-bench: baselines for {context.event.tag}\n\n{summary}\n"
    if context.step_summary:
        append_summary(context.step_summary, text)
    out.write(text)
    return 0


def cmd_comment(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    """workflow_run job: post the benchmark job's report, checking which PR it belongs to."""
    from ci_bench.config import load_config

    context = load_actions_context(env)
    event = context.event
    if not isinstance(event, WorkflowRun):
        raise InputError(f"comment needs a workflow_run event, got {context.event_name or 'none'}")
    report = read_model(
        args.report_dir / "report.json", Report, what="report", schema_version=REPORT_SCHEMA_VERSION
    )
    if event.event != "pull_request":
        out.write(f"ci-bench: the run was a {event.event} event: no pull request to comment on\n")
        return 0
    client = api_client(context, load_config(None, cwd))
    number = _pull_number(args.report_dir, event, client)
    out.write(f"ci-bench: {_comment(client, number, event.name, report, context)}\n")
    return 0


def _pull_number(report_dir: Path, event: WorkflowRun, client: GitHubClient) -> int:
    """GitHub's own list first; a fork's run has none, so the artifact's number is checked.

    The artifact comes from pull-request code and is untrusted: its number counts only if
    that pull request's head is the commit the benchmark run measured.
    """
    if event.pull_numbers:
        return event.pull_numbers[0]
    path = report_dir / "pr.json"
    try:
        number = int(json.loads(path.read_text(encoding="utf-8"))["number"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: no pull request number: {exc}") from None
    head = client.pull_head_sha(number)
    if head != event.head_sha:
        raise InputError(
            f"{path}: pull request #{number} is at {head[:12]}, not the measured "
            f"{event.head_sha[:12]}; not commenting"
        )
    return number
