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

from ci_bench.commands.compare import baselines_dir, load_results, lookups_for, parse_fail_on
from ci_bench.commands.config import Config
from ci_bench.commands.run import load_project, measure
from ci_bench.contract.spec import KernelSpec
from ci_bench.errors import ExitCode, InputError
from ci_bench.github.api import COMMENT_LIMIT, ApiSettings, GitHubClient, GitHubError, marker
from ci_bench.github.context import ActionsContext, Dispatch, PullRequest, Release, WorkflowRun
from ci_bench.github.context import load_context as load_actions_context
from ci_bench.github.outputs import annotations, append_summary, report_outputs, write_outputs
from ci_bench.github.promote import promote_through_api
from ci_bench.judge.compare import compare
from ci_bench.report.render import fit_markdown, markdown_report
from ci_bench.schema import REPORT_SCHEMA_VERSION, Report, Results
from ci_bench.store.files import atomic_write_text, dump_model, read_model

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
        comment_author=g.comment_author,
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


REPORT_FILES = {"baseline": "report", "ab": "ab-report"}


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
        prefix = "" if report.mode == "baseline" else "ab-"
        values = report_outputs(report, report_path)
        write_outputs(context.output, {f"{prefix}{k}": v for k, v in values.items()})
    for line in annotations(report):
        out.write(line + "\n")
    return report_path


def _where(context: ActionsContext) -> str:
    run = f" of {context.run_url}" if context.run_url else ""
    return f"the job summary and the `{ARTIFACT}` artifact{run}"


def _comment(
    client: GitHubClient, number: int, workflow: str, report: Report, context: ActionsContext
) -> str:
    tag = marker(workflow, report.meta.device.identity, report.mode)
    body = fit_markdown(report, COMMENT_LIMIT - len(tag) - 1, _where(context))
    action, url = client.upsert_comment(number, tag, body)
    return f"{report.mode} comment {action}: {url}"


def combined_exit(codes: list[int]) -> int:
    """A failure anywhere fails; 'nothing measured' only when nothing failed."""
    for code in (ExitCode.FAILED, ExitCode.NOTHING_MEASURED, ExitCode.USAGE):
        if code in codes:
            return int(code)
    return int(ExitCode.OK)


def _mode(args: argparse.Namespace, context: ActionsContext, config: Config) -> str:
    event = context.event
    if args.mode:
        return args.mode
    if isinstance(event, Dispatch) and event.mode:
        if event.mode not in ("baseline", "ab", "both"):
            raise InputError(
                f"workflow_dispatch input mode: {event.mode!r} is not baseline, ab or both"
            )
        return event.mode
    return config.pr_mode if isinstance(event, PullRequest) else "baseline"


def _base_ref(args: argparse.Namespace, context: ActionsContext) -> str:
    event = context.event
    if args.base:
        return args.base
    if isinstance(event, PullRequest):
        return event.base_sha
    if isinstance(event, Dispatch) and event.base:
        return event.base
    raise InputError("A/B mode needs a base: --base REF, or a pull request's base commit")


def _reports(
    args: argparse.Namespace,
    config: Config,
    specs: Mapping[str, KernelSpec],
    context: ActionsContext,
    env: Mapping[str, str],
    results: Results | None,
) -> list[Report]:
    """The baseline and/or A/B reports the mode asks for, confirmation passes included."""
    from ci_bench.commands.ab import run_ab
    from ci_bench.commands.run import remeasure

    mode = _mode(args, context, config)
    reports = []
    if mode in ("baseline", "both"):
        assert results is not None
        report = _report(args, config, results)
        flagged = {v.id for v in report.cases if v.verdict == "regression"}
        if flagged and config.confirm and not args.results:
            results = remeasure(args, config, specs, results, flagged, env)
            atomic_write_text(args.out_dir / "results.json", dump_model(results))
            report = _report(args, config, results)
        reports.append(report)
    if mode in ("ab", "both"):
        args.no_confirm = not config.confirm
        reports.append(run_ab(args, config, specs, _base_ref(args, context), env))
    return reports


def cmd_ci(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    context = load_actions_context(env)
    if isinstance(context.event, WorkflowRun):
        raise InputError("workflow_run events post comments: use `ci-bench comment --report-dir`")
    config, specs = load_project(args, cwd)
    _apply_event(args, context, config, specs)
    out_dir: Path = args.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    event = context.event
    if isinstance(event, PullRequest):
        pr = {"number": event.number, "head_sha": event.head_sha}
        atomic_write_text(out_dir / "pr.json", json.dumps(pr) + "\n")
    results = None
    if args.results:
        results = load_results(args.results)
    elif isinstance(event, Release) or _mode(args, context, config) != "ab":
        args.output = out_dir / "results.json"
        results = measure(args, config, specs, env)
    if isinstance(event, Release):
        assert results is not None
        return _release(args, config, context, results, out)

    reports = _reports(args, config, specs, context, env, results)
    for report in reports:
        _publish_locally(report, out_dir, context, out, files_only=args.no_publish)
        out.write(markdown_report(report) if not context.step_summary else report.headline + "\n")
    code = combined_exit([r.exit_code for r in reports])
    if isinstance(event, PullRequest) and not (args.no_comment or args.no_publish):
        if event.from_fork or not context.token:
            why = "a fork's token is read-only" if event.from_fork else "no GITHUB_TOKEN"
            sys.stderr.write(f"ci-bench: comment left to the workflow_run job ({why})\n")
            return code
        try:
            client = api_client(context, config)
            workflow = context.workflow or "ci-bench"
            for report in reports:
                message = _comment(client, event.number, workflow, report, context)
                sys.stderr.write(f"ci-bench: {message}\n")
        except GitHubError as exc:
            sys.stderr.write(f"ci-bench: error: {exc} (the report is in {out_dir})\n")
            return code if code != ExitCode.OK else int(ExitCode.GITHUB)
    return code


def _repo_path(args: argparse.Namespace, config: Config) -> str:
    """The baselines folder as a path inside the repository (the contents API's view)."""
    folder = baselines_dir(args, config).resolve()
    try:
        return folder.relative_to(config.root.resolve()).as_posix().strip("/")
    except ValueError:
        raise InputError(f"{folder}: the baselines folder must be inside the repository") from None


def _release(
    args: argparse.Namespace,
    config: Config,
    context: ActionsContext,
    results: Results,
    out: TextIO,
) -> int:
    from ci_bench.store.baselines import check_promotable

    assert isinstance(context.event, Release)
    check_promotable(results, str(args.out_dir / "results.json"))
    via = args.promote_via or config.promote_via
    client = api_client(context, config)
    folder = _repo_path(args, config)
    lines = promote_through_api(client, results, context.event.tag, folder, via)
    summary = "\n".join(f"- {line}" for line in lines) or "- nothing to promote"
    text = f"### ci-bench: baselines for {context.event.tag}\n\n{summary}\n"
    if context.step_summary:
        append_summary(context.step_summary, text)
    out.write(text)
    return 0


def cmd_comment(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    """workflow_run job: post the benchmark job's report, checking which PR it belongs to."""
    from ci_bench.commands.config import load_config

    context = load_actions_context(env)
    event = context.event
    if not isinstance(event, WorkflowRun):
        raise InputError(f"comment needs a workflow_run event, got {context.event_name or 'none'}")
    paths = [args.report_dir / f"{stem}.json" for stem in REPORT_FILES.values()]
    present = [p for p in paths if p.is_file()]
    if not present:
        raise InputError(f"{args.report_dir}: no report.json or ab-report.json in the artifact")
    reports = [
        read_model(p, Report, what="report", schema_version=REPORT_SCHEMA_VERSION) for p in present
    ]
    if event.event != "pull_request":
        out.write(f"ci-bench: the run was a {event.event} event: no pull request to comment on\n")
        return 0
    client = api_client(context, load_config(None, cwd))
    number = _pull_number(args.report_dir, event, client)
    for report in reports:
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
