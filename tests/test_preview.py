"""``ci-bench preview``: a kernel repository's pull request rehearsed on this machine,
through the real CLI in a real git repository, ending in the comment a PR would get."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ci_bench.commands.preview import comment_markdown
from ci_bench.report.sticky import sections_of
from tests.harness import pipeline_fixtures
from tests.harness.pipeline_fixtures import keep
from tests.harness.pipeline_repo import NUMBER, REPO, World, failures, git
from tests.harness.workflow_runner import WorkflowRun

template, jax_cache = pipeline_fixtures.template, pipeline_fixtures.jax_cache
world = pipeline_fixtures.world

ROOT = Path(__file__).resolve().parents[1]
CLI = str(Path(sys.executable).parent / "ci-bench")
CASE = "rmsnorm/R64-D256/float32"


def _repo(tmp: Path) -> Path:
    repo = tmp / "kernels"
    repo.mkdir()
    shutil.copy(ROOT / "examples" / "rmsnorm.py", repo / "rmsnorm.py")
    (repo / "pyproject.toml").write_text(
        '[tool.ci-bench]\nkernels = ["rmsnorm"]\nwarmup = 1\nrepeats = 5\n'
        'compilation-cache-dir = ".cache/jax"\n'
    )
    (repo / ".gitignore").write_text(".cache/\nci-bench-preview/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Dev")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the kernel")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "NOTES.md").write_text("a change that is not the kernel\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "notes")
    return repo


def _preview(repo: Path, *args: str, env: dict[str, str] | None = None):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CI_BENCH_"))}
    return subprocess.run(
        [CLI, "preview", *args],
        cwd=repo,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def test_preview_writes_the_comment_a_pull_request_would_get_and_opens_it(tmp_path):
    repo = _repo(tmp_path)
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    browser.chmod(0o755)
    flags = ["--profile", "smoke", "--case", CASE, "--repeats", "5", "-o", "comment.md"]
    done = _preview(repo, "--base", "main", *flags, "--open", env={"BROWSER": str(browser)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    comment = (repo / "comment.md").read_text()
    assert comment == (repo / "ci-bench-preview" / "comment.md").read_text()
    # The sticky comment's marker, then both sections: the benchmark job's verdict and the
    # lowering relay's section, as on a pull request.
    assert comment.startswith("<!-- ci-bench sticky: benchmark|pr 1 -->\n")
    sections = sections_of(comment.split("\n", 1)[1])
    assert set(sections) == {"verdict", "lowering"}
    head = git(repo, "rev-parse", "HEAD")
    base = git(repo, "rev-parse", "main")
    assert f"PR head `{head[:12]}`" in sections["verdict"]
    assert f"merge base {base[:12]}" in sections["verdict"]  # the A/B ran against it
    assert "the 1 case lowers for TPU on all 8 target chips" in sections["lowering"]
    assert f"against merge base {base[:12]}" in sections["lowering"]
    assert "the smoke profile's 1 case is correct" in sections["lowering"]
    page = repo / "ci-bench-preview" / "comment.html"
    assert opened.read_text().strip() == page.resolve().as_uri()
    assert "<table>" in page.read_text()
    assert "the comment is in comment.md" in done.stdout

    again = _preview(repo, "--base", "main", "-o", "comment.md")  # never replaced silently
    assert again.returncode == 2
    assert "comment.md" in again.stderr


def test_a_base_that_is_no_commit_is_one_line_exit_2(tmp_path):
    repo = _repo(tmp_path)
    done = _preview(repo, "--base", "no-such-branch")
    assert done.returncode == 2
    assert done.stderr.startswith("ci-bench: error: --base: no-such-branch is not a commit")
    assert len(done.stderr.strip().splitlines()) == 1


# -- preview renders exactly what the relay and comment jobs post (issue 38) -----------

# The pipeline test's kernel with its unit count as a tunable, shipped at a slow default:
# the lower job's tiling search finds the faster one (tests/test_tiling_hint.py).
TUNABLE = """
import dataclasses

from ci_bench.spec import Tunables


def work_units(a, b, units=UNITS):
    return _work(a, b, units=units)


SPEC = dataclasses.replace(
    SPEC,
    tunables=Tunables(
        space={"units": (1, 64)},
        default={"units": 64},
        build=lambda config: functools.partial(work_units, **config),
    ),
)
"""


def _tunable_pr(world: World) -> tuple[str, WorkflowRun, WorkflowRun]:
    """A pull request whose kernel ships a slow tiling, through the workflows' own steps:
    its benchmark run and its lowering run (the relay posted after it)."""
    kernel = (world.repo / "pipeline_kernel.py").read_text()
    head = world.commit(
        "tunable", world.base, "tunables, default 64", {"pipeline_kernel.py": kernel + TUNABLE}
    )
    benchmark = world.on_pr(world.pull_request("opened", head), lowering=True)
    lower, relay = world.lowering_runs
    assert benchmark.result("comment") == "success", failures(benchmark)
    assert relay.result("relay") == "success", failures(relay)
    return head, benchmark, lower


def test_preview_composes_the_posted_comment_byte_for_byte_from_the_same_jobs_files(
    world, tmp_path
):
    head, benchmark, lower = _tunable_pr(world)
    posted = world.the_comment()
    assert "💡 a faster tiling by the cost model" in posted
    assert "Reported by the pull request's own code" in posted
    jobs = tmp_path / "jobs"  # preview's --out-dir layout, filled from the runs' artifacts
    shutil.copytree(benchmark.artifacts / "ci-bench-report", jobs / "benchmark")
    shutil.copytree(lower.artifacts / "ci-bench-lowering", jobs / "lowering")
    links = tuple(f"https://github.com/{REPO}/actions/runs/{r.run_id}" for r in (benchmark, lower))
    shown = comment_markdown(jobs, head, "benchmark", 1.5, number=NUMBER, runs=links)
    assert shown == posted


def test_preview_shows_the_lowering_section_the_relay_posts_tiling_hints_and_claim(world, tmp_path):
    head, _benchmark, lower = _tunable_pr(world)
    posted = sections_of(world.the_comment().split("\n", 1)[1])["lowering"]
    git(world.repo, "checkout", "-q", head)
    done = _preview(world.repo, "--base", "master", "--out-dir", str(tmp_path / "preview"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    comment = (tmp_path / "preview" / "comment.md").read_text()
    shown = sections_of(comment.split("\n", 1)[1])["lowering"]
    keep(world, comment, "preview.md")
    # The lowering section is exact (no timing in it): only the run link differs.
    link = f"[lowering run](https://github.com/{REPO}/actions/runs/{lower.run_id}) · "
    assert shown == posted.replace(link, "")
