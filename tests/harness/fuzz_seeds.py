"""Real run outputs the fuzzer mutates: one measured run, and what each command made of it.

``make_seeds`` builds, once per session, a small project (a git repository, a one-shape
matmul kernel, a ``[tool.ci-bench]`` config) and runs the real CLI in it: ``run`` (a real
measurement), ``promote``, ``compare``, ``record``, ``lower`` and ``ci`` on a pull-request
event (the comment job's artifact). Every fuzz input starts from a copy of that folder, so
inputs are mutations of files ci-bench really wrote, not of hand-made factories.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from kernels.matmul import VERSION as MATMUL_VERSION  # tiny_matmul is the project's matmul

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
EVENTS = FIXTURES / "events"

# Where each seed lives in the project folder (its kind names the mutations that apply).
SEED_FILES = {
    "results": "results.json",
    "baseline": f"baselines/matmul_v{MATMUL_VERSION}.json",
    "report": "report.json",
    "markdown": "report.md",
    "history": "history/*.jsonl",  # the device's file, named by its identity
    "lowering": "lowering.json",
    "pr": "ci-out/pr.json",
    "artifact_report": "ci-out/report.json",
    "event": "events/pull_request.json",
    "config": "pyproject.toml",
}
TUNED = f"baselines/matmul_v{MATMUL_VERSION}.tuned.v5e.json"  # not a kind: read, never mutated
CONFIG = """\
[tool.ci-bench]
kernels = ["tiny_matmul"]
baselines-dir = "baselines"
compilation-cache-dir = "{cache}"

[tool.ci-bench.github]
retries = 0
backoff = 0
timeout = 5
"""


@dataclass(frozen=True)
class Seeds:
    """The project folder every input copies, and the code under test."""

    project: Path
    code_root: Path  # the checkout whose ci_bench is fuzzed (PYTHONPATH)

    def path(self, kind: str) -> Path:
        name = SEED_FILES[kind]
        if "*" in name:
            found = sorted(self.project.glob(name))
            return found[0] if found else self.project / name
        return self.project / name

    def relative(self, kind: str) -> str:
        return str(self.path(kind).relative_to(self.project))

    def data(self, kind: str) -> bytes:
        return self.path(kind).read_bytes()

    def json(self, kind: str) -> object:
        return json.loads(self.data(kind))

    def env(self) -> dict[str, str]:
        """The environment a ci-bench process of the code under test needs."""
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_"))}
        path = os.pathsep.join([str(self.code_root), str(FIXTURES)])
        return {**clean, "PYTHONPATH": path, "CI_BENCH_FUZZ": "1"}


def _cli(seeds: Seeds, *args: str, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ci_bench.commands.cli", *args],
        cwd=seeds.project,
        env={**seeds.env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode not in (0, 1):
        raise RuntimeError(f"seed step {args} failed ({done.returncode}): {done.stderr[-2000:]}")


def _git(folder: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "fuzz",
        "GIT_AUTHOR_EMAIL": "fuzz@example.com",
        "GIT_COMMITTER_NAME": "fuzz",
        "GIT_COMMITTER_EMAIL": "fuzz@example.com",
    }
    done = subprocess.run(
        ["git", *args], cwd=folder, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _pull_request_event(head: str, base: str) -> dict[str, object]:
    """GitHub's own payload example, pointed at this repository's commits."""
    event = json.loads((EVENTS / "pull_request_opened.json").read_text())
    event["pull_request"]["head"]["sha"] = head
    event["pull_request"]["base"]["sha"] = base
    return event


def make_seeds(folder: Path, *, cache: Path, code_root: Path = REPO) -> Seeds:
    """The project in ``folder`` with every seed file; reused when already complete."""
    seeds = Seeds(folder, code_root)
    if all(seeds.path(kind).exists() for kind in SEED_FILES) and (folder / TUNED).is_file():
        return seeds
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text(CONFIG.format(cache=cache.as_posix()))
    shutil.copy(FIXTURES / "tiny_matmul.py", folder / "tiny_matmul.py")
    (folder / ".gitignore").write_text(".cache/\n")
    _git(folder, "init", "-q", "-b", "main")
    _git(folder, "add", "-A")
    _git(folder, "commit", "-q", "-m", "first")
    base = _git(folder, "rev-parse", "HEAD")
    (folder / "README.md").write_text("fuzz project\n")
    _git(folder, "add", "-A")
    _git(folder, "commit", "-q", "-m", "Second (#2)")
    head = _git(folder, "rev-parse", "HEAD")

    _cli(seeds, "run", "--repeats", "5", "--warmup", "1", "-q", "-o", "results.json")
    _cli(seeds, "promote", "results.json", "--tag", "v0.1.0")
    # A committed tuned file beside the baselines, as TUNE.md recommends: every reader of
    # baselines/ (site, history, compare, ci) must take it for what it is (issue 54 D1).
    _cli(seeds, "tune", "--chip", "v5e", "--write", "-q")
    _cli(seeds, "compare", "results.json", "-o", "report.json", "--markdown", "report.md")
    _cli(seeds, "record", "results.json", "--history", "history", "--report", "report.json")
    _cli(seeds, "lower", "--platform", "tpu", "-q", "-o", "lowering.json")
    (folder / "events").mkdir()
    seeds.path("event").write_text(json.dumps(_pull_request_event(head, base), indent=2))
    _cli(
        seeds,
        "ci",
        "--results",
        "results.json",
        "--out-dir",
        "ci-out",
        "--mode",
        "baseline",
        "--baselines-ref",
        "",
        "--no-comment",
        env={
            "GITHUB_EVENT_NAME": "pull_request_target",
            "GITHUB_EVENT_PATH": str(seeds.path("event")),
            "GITHUB_REPOSITORY": "octo/fuzz",
            "GITHUB_RUN_ID": "7",
        },
    )
    missing = [kind for kind in SEED_FILES if not seeds.path(kind).exists()]
    missing += [] if (folder / TUNED).is_file() else [TUNED]
    if missing:
        raise RuntimeError(f"seed files not made: {missing}")
    return seeds


def describe(seeds: Seeds) -> str:
    """One line per seed: what the fuzzer starts from."""
    rows = [f"{kind:16s} {seeds.path(kind).stat().st_size:8d} B" for kind in SEED_FILES]
    return textwrap.indent("\n".join(rows), "  ")
