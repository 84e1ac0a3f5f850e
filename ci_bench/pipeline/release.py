"""Release tags promote baselines; pushes to the default branch record the history."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

from pydantic import ValidationError

from ci_bench.contract.spec import KernelSpec
from ci_bench.errors import InputError
from ci_bench.github.api import GitHubClient, GitHubError
from ci_bench.github.context import ActionsContext, Release, merged_pull_number
from ci_bench.github.history import append_through_api
from ci_bench.github.markers import legacy_marker, marker
from ci_bench.github.outputs import append_summary
from ci_bench.github.promote import promote_through_api
from ci_bench.measure.kernel_process import KernelCodeError
from ci_bench.pipeline.context import Context
from ci_bench.pipeline.kernels import HEAD, root_of
from ci_bench.pipeline.publish import api_client
from ci_bench.pipeline.request import Request
from ci_bench.report.sticky import acceptance_in
from ci_bench.schema import Report, Results
from ci_bench.schema.history import AcceptanceRecord
from ci_bench.store.baselines import check_promotable, dirty_note
from ci_bench.store.files import atomic_write_text, dump_model
from ci_bench.store.history import DATA_BRANCH, DEFAULT_KEEP, record_from_results


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


def _repo_path(request: Request) -> str:
    """The baselines folder as a path inside the repository (the contents API's view)."""
    folder = request.baselines.folder.resolve()
    try:
        return folder.relative_to(request.config.root.resolve()).as_posix().strip("/")
    except ValueError:
        raise InputError(f"{folder}: the baselines folder must be inside the repository") from None


def promote(
    request: Request,
    context: ActionsContext,
    results: Results,
    out: TextIO,
    kept: Sequence[str] = (),
) -> None:
    """A release tag's results become the baselines, through the contents API (``kept``:
    the tuned configs that stay beside them)."""
    release = request.release
    assert release is not None
    check_promotable(results, str(request.outputs.out_dir / "results.json"))
    client = api_client(context, request.config)
    lines = promote_through_api(
        client, results, release.tag, _repo_path(request), request.publishing.promote_via
    )
    written = any(not line.startswith("unchanged") for line in lines)
    note = dirty_note(results) if written else None
    summary = "\n".join(f"- {line}" for line in [*lines, *kept, *filter(None, [note])])
    summary = summary or "- nothing to promote"
    text = f"### ci-bench: baselines for {release.tag}\n\n{summary}\n"
    out.write(text)  # first: a bad GITHUB_STEP_SUMMARY must not hide what was promoted
    if context.step_summary:
        append_summary(context.step_summary, text)


def record(
    results: Results,
    report: Report,
    context: ActionsContext,
    request: Request,
    head_message: str | None,
    out: TextIO,
) -> None:
    """One history record of a default-branch push, on the data branch."""
    entry = record_from_results(
        results,
        source="run",
        verdicts={c.id: c.verdict for c in report.cases},
        pr=merged_pull_number(head_message),
        tag=None,
        origin=str(request.outputs.out_dir / "results.json"),
    )
    client = api_client(context, request.config)
    if entry.pr is not None:
        entry = entry.model_copy(update={"acceptance": _acceptance(client, request, entry.pr)})
    outcome, path = append_through_api(
        client, entry, branch=DATA_BRANCH, folder="history", keep=DEFAULT_KEEP
    )
    out.write(f"{outcome}: {entry.commit[:12]} ({entry.device.identity}) in {path}\n")


def _acceptance(client: GitHubClient, request: Request, number: int) -> AcceptanceRecord | None:
    """The merged pull request's acceptance, as the benchmark's own comment job recorded it
    in the sticky comment (only the bot's comment counts; pull-request code never wrote it)."""
    key = request.config.github.comment_key
    try:
        body = client.find_comment(number, marker(key, number), legacy_marker(key))
    except GitHubError as exc:  # the record still goes in, without it
        sys.stderr.write(f"ci-bench: no acceptance read for #{number}: {exc}\n")
        return None
    found = acceptance_in(body)
    try:
        return AcceptanceRecord.model_validate(found) if found else None
    except ValidationError:
        sys.stderr.write(f"ci-bench: #{number}: the comment's acceptance line is unreadable\n")
        return None


def promote_check(ctx: Context) -> None:
    """Before PROMOTE's measuring: a release tag's kernel and version agree with its SPEC,
    and the tuned configs that stay beside the new baselines are known."""
    request = ctx.request
    if request.release is None:  # the role named by hand for another event
        raise InputError(
            "ci --role promote runs on a release tag push (refs/tags/v*); this event is "
            f"{ctx.actions.event_name or 'none'}, so there is nothing to promote"
        )
    head = ctx.kernels()  # described in the worker that then measures
    check_release(request.release, head.specs)
    api_client(ctx.actions, request.config)  # a missing token: said now, not after measuring
    modules, root = root_of(request)
    try:
        ctx.kept = head.process.call(
            "ci_bench.pipeline.tuned:release_tuned_in_worker",
            modules,
            root,
            request.baselines.folder,
            request.release.kernel,
            what="tuned configs",
            doing="checked",
        )
    except KernelCodeError as exc:
        if exc.how == "failed":  # a broken tuned file: its own one-line error
            raise InputError(exc.cause) from None
        raise exc.on(HEAD) from None


def record_check(ctx: Context) -> None:
    """Before RECORD's measuring: a push to a branch (history is the default branch's, never
    a pull request's or a tag's commits), and a token to write the record with."""
    actions = ctx.actions
    if actions.event_name != "push" or actions.event is not None:  # a tag push: a Release
        what = "a tag push" if isinstance(actions.event, Release) else actions.event_name
        raise InputError(
            "ci --role record runs on a push to the default branch; this event is "
            f"{what or 'none'}, so there is nothing to record"
        )
    api_client(actions, ctx.request.config)


def promote_step(ctx: Context) -> None:
    """PROMOTE, a release tag: the release profile measured on a trusted runner (MEASURE)
    becomes the baselines."""
    assert ctx.results is not None
    promote(ctx.request, ctx.actions, ctx.results, ctx.out, ctx.kept)


def record_step(ctx: Context) -> None:
    """RECORD, a push to the default branch: the measured and judged (for the record,
    never failing) results as one history record on the data branch."""
    assert ctx.results is not None
    assert ctx.report is not None
    out_dir = ctx.request.outputs.out_dir
    atomic_write_text(out_dir / "report.json", dump_model(ctx.report))
    record(ctx.results, ctx.report, ctx.actions, ctx.request, ctx.actions.head_message, ctx.out)
