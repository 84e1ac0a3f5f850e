"""``ci-bench preview``: the pull-request pipeline against a local base ref, on this
machine, ending in the exact sticky comment a pull request would get.

The adopter's rehearsal before pushing: the pipeline's own roles run as a pull request's
jobs would (``all``: measure, confirm, the A/B against the merge base, baselines read at
the base commit, the cost model; ``lower``: TPU lowering, the cost model against the merge
base, the smoke profile's correctness), and the comment is composed from their files as
the comment and relay jobs compose it. Nothing is sent anywhere.
"""

from __future__ import annotations

import argparse
import html
import webbrowser
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from ci_bench.commands.common_args import FILE, FOLDER, add_selection
from ci_bench.commands.validate import REPEATS_MAX, int_range, path_arg
from ci_bench.contract.spec import PROFILES
from ci_bench.errors import ExitCode
from ci_bench.github.context import PUBLIC_API, ActionsContext, PullRequest
from ci_bench.outcome import exit_code
from ci_bench.pipeline.config import load_config
from ci_bench.pipeline.git import git, resolve_commit
from ci_bench.store.files import atomic_write_text

NAME = "preview"
# What to run before a pull request (and after a preview that measured nothing): the
# profile it runs, for correctness only, without the minutes of timing.
RUN_FIRST = (
    "`ci-bench check-spec --run` runs every case of the pull request's profile (ci) once "
    "for correctness, without timing, and names each case that fails"
)
# The pull request a preview stands for: none exists, so no real number is named.
NUMBER = 1
REPOSITORY = "local/preview"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    preview = sub.add_parser(
        NAME,
        help="the pull-request pipeline against a local base ref, here: the sticky comment "
        "a pull request would get",
    )
    add_selection(preview)
    preview.add_argument(
        "--base",
        required=True,
        metavar="REF",
        help="the branch the pull request would target, e.g. main: the A/B measures this "
        "checkout against its merge base with HEAD; baselines are read at REF",
    )
    FILE.on(
        preview.add_argument(
            "--output",
            "-o",
            type=path_arg,
            help="also write the comment's markdown here (it is always in --out-dir, as "
            "comment.md)",
        )
    )
    FOLDER.on(
        preview.add_argument(
            "--out-dir",
            type=path_arg,
            default=Path("ci-bench-preview"),
            help="the jobs' files: results, reports, lowering (default ci-bench-preview/)",
        )
    )
    preview.add_argument(
        "--repeats",
        type=int_range(1, REPEATS_MAX),
        help="timed calls per case and A/B rounds (default: config, as a pull request)",
    )
    preview.add_argument(
        "--lower-profile",
        choices=PROFILES,
        default="smoke",
        help="the profile the lowering check lowers and runs for correctness (as lower.yml's "
        "default: smoke)",
    )
    preview.add_argument(
        "--open", action="store_true", help="show the comment in a browser (an HTML file)"
    )
    preview.add_argument("--force", action="store_true", help="replace an existing --output file")


def _flags(args: argparse.Namespace, **more: Any) -> dict[str, Any]:
    """The flags a pipeline role reads (``ci``'s), from preview's own."""
    return {
        "kernel": args.kernel,
        "case": args.case,
        "profile": args.profile,
        "kernel_module": args.kernel_module,
        "config": args.config,
        "repeats": args.repeats,
        "no_publish": True,
        "quiet": False,
        **more,
    }


def comment_markdown(
    out_dir: Path,
    head: str,
    key: str,
    tune_hint: float = 0.0,
    *,
    number: int = NUMBER,
    runs: tuple[str | None, str | None] = (None, None),
) -> str:
    """The comment exactly as the comment job (the verdict) and the relay job (the lowering
    section) write it, from the jobs' files in ``out_dir`` (``benchmark/``, ``lowering/``),
    through the same functions; ``runs``: the benchmark and lowering runs' links (a
    preview has none)."""
    from ci_bench.github.markers import marker
    from ci_bench.pipeline.judging import load_report
    from ci_bench.pipeline.lowering import lowering_section_of
    from ci_bench.pipeline.publish import verdict_text
    from ci_bench.report.sticky import compose

    benchmark_run, lowering_run = runs
    sections = {}
    report_path = out_dir / "benchmark" / "report.json"
    if report_path.is_file():
        update = {"head_sha": head, "run_url": benchmark_run}
        report = load_report(report_path).model_copy(update=update)
        sections["verdict"] = verdict_text(report, benchmark_run)
    if (out_dir / "lowering" / "lowering.json").is_file():
        folder = out_dir / "lowering"
        sections["lowering"] = lowering_section_of(folder, head, lowering_run, tune_hint)
    return f"{marker(key, number)}\n{compose(None, sections)}"


def html_page(markdown: str) -> str:
    """The comment as a page a browser shows: rendered where a markdown renderer is
    installed (markdown-it-py, or Python-Markdown with the docs extra), else as text."""
    try:
        from markdown_it import MarkdownIt

        body = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    except ImportError:
        try:
            import markdown as python_markdown

            body = python_markdown.markdown(markdown, extensions=["tables"])
        except ImportError:
            body = f"<pre>{html.escape(markdown)}</pre>"
    style = (
        "body{font:14px -apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:880px;"
        "margin:2em auto;line-height:1.5}table{border-collapse:collapse}"
        "td,th{border:1px solid #d0d7de;padding:4px 10px}code{background:#f6f8fa}"
    )
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>ci-bench preview</title>'
        f"<style>{style}</style></head><body>{body}</body></html>\n"
    )


def run(args: argparse.Namespace, env: Mapping[str, str], cwd: Path, out: TextIO) -> int:
    from ci_bench.pipeline.publish import comment_key
    from ci_bench.pipeline.run import run_ci

    config = load_config(args.config, cwd)
    root = config.root
    head = resolve_commit(root, "HEAD", "preview")
    base = resolve_commit(root, args.base, "--base")
    dirty = bool(git(root, "status", "--porcelain", "--untracked-files=no"))
    event = PullRequest(
        number=NUMBER,
        head_sha=head,
        base_ref=args.base,
        base_sha=base,
        from_fork=False,
        action="opened",
    )
    actions = ActionsContext(
        event_name="pull_request_target",
        event=event,
        repository=REPOSITORY,
        sha=head,
        ref=None,
        token=None,
        api_url=PUBLIC_API,
        server_url="https://github.com",
        run_id=None,
        workflow=None,
        step_summary=None,
        output=None,
    )
    # Nothing of a real workflow's environment leaks in: this is not a GitHub job.
    local = {k: v for k, v in env.items() if not k.startswith(("GITHUB_", "CI_BENCH_PLAN"))}
    out_dir = Path(args.out_dir)
    out.write(f"ci-bench preview: the pull request {head[:12]} -> {args.base}\n")
    benchmark = run_ci(
        _flags(args, role="all", out_dir=out_dir / "benchmark"), config, actions, local, out
    )
    lowering = run_ci(
        _flags(
            args,
            role="lower",
            profile=args.lower_profile,
            warmup=0,
            repeats=1,
            out_dir=out_dir / "lowering",
        ),
        config,
        replace(actions, event_name="pull_request"),
        local,
        out,
    )
    markdown = comment_markdown(out_dir, head, comment_key(config), config.tune_hint)
    written = out_dir / "comment.md"
    atomic_write_text(written, markdown)  # a generated folder: rewritten each time
    if args.output is not None:
        atomic_write_text(Path(args.output), markdown)
        written = Path(args.output)
    out.write(f"ci-bench preview: the comment is in {written}")
    out.write(" (uncommitted changes were measured as the head)\n" if dirty else "\n")
    if args.open:
        page = out_dir / "comment.html"
        atomic_write_text(page, html_page(markdown))
        webbrowser.open(page.resolve().as_uri())
        out.write(f"ci-bench preview: opened {page}\n")
    code = exit_code(benchmark)
    if code == ExitCode.NOTHING_MEASURED:
        out.write(f"ci-bench preview: nothing measured (exit 3); {RUN_FIRST}\n")
    return int(code if code != ExitCode.OK else exit_code(lowering))
