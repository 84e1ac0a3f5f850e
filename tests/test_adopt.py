"""Adopting ci-bench from another repository: the package, ``ci-bench init``, and an
adopter's kernel library whose caller workflows run ci-bench's reusable ones end to end.

The adopter (tests/fixtures/adopter) is a TPU-only Pallas library with its own package name
(``tpu_ops``), made a git repository and adopted with ``ci-bench init``. Its workflows run
in the runner emulation, ``uses: ci-bench/ci-bench/...@v<version>`` mapped onto this
checkout's reusable workflows and setup action; the measuring jobs' install step really
runs, installing the wheel built from this repository (``ci-bench==<version>`` found there).
``ci-bench init`` and the reusable workflows' own pins: tests/test_adopt_init.py.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ci_bench import HOMEPAGE, REPOSITORY, __version__
from ci_bench.pipeline.adopt import package_at
from tests.conftest import run_cli
from tests.harness import forkserver
from tests.harness.adopt import ADOPTER, PIN, ROOT, ZIZMOR
from tests.harness.adopt import zizmor as _zizmor
from tests.harness.github_server import FakeGitHub
from tests.harness.pipeline_repo import REPO, TOKEN, event, failures, git, report_of
from tests.harness.workflow_runner import Runner

NUMBER = 2


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ci-bench's wheel, built from this checkout as a release would build it."""
    dist = tmp_path_factory.mktemp("dist")
    # One build at a time in this checkout: setuptools builds in the tree (build/), and
    # two test workers building at once break each other's build.
    lock = tmp_path_factory.getbasetemp().parent / "ci-bench-wheel.lock"
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(ROOT)],
            check=True,
            capture_output=True,
        )
    (found,) = dist.glob("ci_bench-*.whl")
    return found


def test_the_wheel_holds_ci_bench_only_and_installs_no_kernels_package(wheel, tmp_path):
    assert wheel.name == f"ci_bench-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
        metadata = archive.read(f"ci_bench-{__version__}.dist-info/METADATA").decode()
    assert tops == {"ci_bench", f"ci_bench-{__version__}.dist-info"}
    assert f"Project-URL: Homepage, {HOMEPAGE}" in metadata
    assert "License-Expression: Apache-2.0" in metadata
    # Installed into a fresh venv: ci_bench, and no top-level `kernels` beside it.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
    )
    probe = "import importlib.util as u; print(u.find_spec('kernels'), u.find_spec('ci_bench'))"
    done = subprocess.run(
        [str(python), "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("None ModuleSpec(")


def _find_links(wheel: Path) -> str:
    """pip's find-links with the built wheel first (ci-bench==<version> resolves to it)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.find-links"],
        capture_output=True,
        text=True,
        check=False,
    )
    configured = done.stdout.strip() if done.returncode == 0 else ""
    return " ".join(
        x for x in (str(wheel.parent), configured, os.environ.get("PIP_FIND_LINKS")) if x
    )


def _adopter_repo(repo: Path) -> Path:
    """The adopter's library, a git repository on master with nothing committed yet."""
    shutil.copytree(ADOPTER, repo)
    git(repo, "init", "-q", "-b", "master")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Dev")
    return repo


@pytest.fixture
def adopter(tmp_path, wheel):
    """The adopter's repository after `ci-bench init`, its fake GitHub and its runner."""
    repo = _adopter_repo(tmp_path / "tpu-ops")
    done = run_cli("init", "--pin", PIN, cwd=repo)
    assert done.returncode == 0, done.stderr
    with (repo / "pyproject.toml").open("a") as handle:
        # The adopter's own settings: a TPU-only library runs under the TPU interpreter on a
        # CPU; a small run for the test; the fake GitHub's retry policy.
        handle.write('cpu-interpret = "tpu"\nwarmup = 1\nrepeats = 3\n\n')
        handle.write("[tool.ci-bench.github]\nretries = 1\nbackoff = 0.01\n")
        handle.write("seconds-between-requests = 0\nseconds-between-writes = 0\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "adopt ci-bench")
    git(repo, "tag", "v0.1.0")
    git(repo, "checkout", "-q", "--detach")
    server = FakeGitHub(
        token=TOKEN, repos=(REPO,), login="github-actions[bot]", default_branch="master"
    )
    fake = server.__enter__()
    fake.add_issue(REPO, "An issue")
    fake.add_issue(REPO, "A pull request")  # number 2
    runner = Runner(
        origin=repo,
        root=tmp_path / "runs",
        api_url=fake.url,
        repository=REPO,
        token=TOKEN,
        installed={
            # this venv; its ci-bench forks from a server that imported it with the
            # jobs' JAX_PLATFORMS (tests/harness/forkserver.py)
            "CI_BENCH_VENV": str(forkserver.venv(tmp_path / "stand-in", {"JAX_PLATFORMS": "cpu"})),
            "CI_BENCH_JAX_CACHE": str(tmp_path / "tool-cache" / "jax"),
        },
        variables={"CI_BENCH_PR_MODE": "baseline"},
        workflow_run_example=event("workflow_run_completed.json"),
        tool_cache=tmp_path / "tool-cache",
        workflows=repo / ".github" / "workflows",
        run_install=frozenset({"measure"}),
        packages={package_at(PIN): str(wheel)},  # ci-bench at the pinned commit: this one
        extra_env={
            "PIP_FIND_LINKS": _find_links(wheel),
            "JAX_PLATFORMS": "cpu",  # jax[tpu] on a CPU host: no TPU to look for
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        },
    )
    try:
        yield repo, fake, runner
        fake.assert_no_violations()
    finally:
        server.__exit__(None, None, None)


def _pr(repo: Path, action: str, head: str, *, fork: bool = False, label: str | None = None):
    name = {
        "opened": "pull_request_opened.json",
        "synchronize": "pull_request_synchronize.json",
        "labeled": "pull_request_labeled.json",
    }[action]
    payload = event(name, **{"pull_request.head.sha": head, "repository.full_name": REPO})
    payload["pull_request"]["base"]["sha"] = git(repo, "rev-parse", "master")
    if fork:
        payload["pull_request"]["head"]["repo"]["full_name"] = "someone/tpu-ops"
    if label is not None:
        payload["label"]["name"] = label
    payload["pull_request"]["labels"] = []
    return payload


def _commit(repo: Path, text: str) -> str:
    git(repo, "checkout", "-q", "-B", "feature", "master")
    (repo / "NOTES.md").write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", text)
    sha = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "--detach")
    return sha


def test_an_adopters_repository_runs_the_pipeline_from_its_caller_workflows(adopter):
    repo, fake, runner = adopter
    base = git(repo, "rev-parse", "master")
    comments = lambda: [c["body"] for c in fake.repos[REPO.lower()].comments.values()]  # noqa: E731

    # A pull request: two shards on the "TPU runners", the install step for real.
    head = _commit(repo, "a change")
    fake.set_pull(REPO, NUMBER, head, base)
    [run] = runner.dispatch(
        "pull_request_target", _pr(repo, "opened", head), "refs/heads/master", base
    )
    assert run.workflow == "benchmark.yml"
    assert run.ran == ["plan", "measure", "measure", "report", "comment"], failures(run)
    installed = run.job("measure")[0].step("Install ci-bench and the kernels")
    assert installed.outcome == "success", installed.output
    report = report_of(run)
    assert sorted(c["id"] for c in report["cases"]) == [
        "scale/M256-N128/float32",
        "scale/M512-N256/float32",
    ]
    assert report["meta"]["settings"]["interpret_mode"] == "tpu"
    assert report["meta"]["tool_version"] == __version__
    # Every job ran ci-bench's setup action from ci-bench at the commit the callers pin.
    fetched = {(repository, ref) for repository, ref, _ in runner.foreign_checkouts}
    assert fetched == {(REPOSITORY, PIN)}
    assert len(runner.foreign_checkouts) == len(run.ran)
    [body] = comments()
    assert body.startswith(f"<!-- ci-bench sticky: benchmark|pr {NUMBER} -->")
    assert f"{HOMEPAGE}/blob/v{__version__}/docs/VERDICTS.md" in body  # ci-bench's docs, not theirs

    # What the install step built: ci-bench from the wheel, the adopter's package, the
    # pinned TPU toolchain (one venv per workspace: the two shard legs are two runners).
    venvs = [p for p in (runner.tool_cache / "ci-bench").glob("venv-*") if p.is_dir()]
    assert venvs
    resolved = (venvs[0] / ".resolved").read_text().splitlines()
    assert any(line.startswith(f"ci-bench=={__version__} @ ") for line in resolved)
    # The callers' own requirement: ci-bench at the commit they pin, never by version.
    asked = {w["requirements"].split()[0] for job, w in runner.installs}
    assert asked == {package_at(PIN)}
    assert {"jax==0.10.2", "jaxlib==0.10.2"} <= set(resolved)
    assert any(line.startswith("libtpu==0.0.42") for line in resolved)
    # Later runs stand in for the install with that venv (the runners keep it).
    runner.run_install = False
    runner.installed["CI_BENCH_VENV"] = str(venvs[0])

    # A fork's push: nothing on the runners; with the label, that commit is measured.
    forked = _commit(repo, "a fork's change")
    fake.set_pull(REPO, NUMBER, forked, base)
    [pushed] = runner.dispatch(
        "pull_request_target",
        _pr(repo, "synchronize", forked, fork=True),
        "refs/heads/master",
        base,
    )
    assert pushed.ran == ["plan", "comment"], failures(pushed)
    assert f"`{forked[:12]}` is not measured yet" in comments()[0]
    [labelled] = runner.dispatch(
        "pull_request_target",
        _pr(repo, "labeled", forked, fork=True, label="benchmark"),
        "refs/heads/master",
        base,
    )
    assert labelled.ran == ["plan", "measure", "measure", "report", "comment"], failures(labelled)
    assert {git(j.workspace, "rev-parse", "HEAD") for j in labelled.job("measure")} == {forked}
    assert len(comments()) == 1

    # A manual run.
    dispatched = event("workflow_dispatch.json", inputs={"profile": "smoke"})
    dispatched["repository"]["full_name"] = REPO
    [manual] = runner.dispatch(
        "workflow_dispatch", dispatched, "refs/heads/master", base, "benchmark.yml"
    )
    assert manual.ran == ["plan", "measure", "measure", "report"], failures(manual)

    # A release tag promotes the adopter's baselines through the contents API.
    tag = event("push_tag.json", ref="refs/tags/v0.1.0", after=base)
    [release] = runner.dispatch("push", tag, "refs/tags/v0.1.0", base)
    assert release.workflow == "release.yml"
    assert release.result("promote") == "success", failures(release)
    stored = fake.files(REPO)
    entry = json.loads(stored["baselines/scale_v0.1.0.json"].decode())["entries"][0]
    assert entry["provenance"]["tag"] == "v0.1.0"


@pytest.mark.skipif(not ZIZMOR.exists(), reason="zizmor (the test extra) is not installed")
def test_an_adopter_from_the_wheel_alone_inits_pins_and_previews_its_first_pull_request(
    tmp_path, wheel
):
    """A kernel team with nothing but the wheel: a fresh venv, their own repository,
    ``init --pin`` (zizmor's default persona clean; the TPU-only kernel found), then
    ``preview`` of a pull request against their main branch."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CI_BENCH_"))}
    env.pop("VIRTUAL_ENV", None)
    env |= {"PIP_FIND_LINKS": _find_links(wheel), "JAX_PLATFORMS": "cpu"}
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    cli = str(venv / "bin" / "ci-bench")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [cli, *args],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )

    repo = _adopter_repo(tmp_path / "tpu-ops")
    adopted = run("init", "--pin", PIN)
    assert adopted.returncode == 0, adopted.stderr
    config = (repo / "pyproject.toml").read_text()
    assert 'cpu-interpret-tpu = ["scale"]' in config  # a TPU-only kernel, found by lowering
    block = config.split("[tool.ci-bench]", 1)[1]
    assert "\ncpu-interpret =" not in block  # not one switch for every kernel
    with (repo / "pyproject.toml").open("a") as handle:
        handle.write("warmup = 1\nrepeats = 3\n")
    clean = _zizmor(repo)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    (repo / ".gitignore").write_text(".cache/\nci-bench-preview/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "adopt ci-bench")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "NOTES.md").write_text("a change\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a change")

    previewed = run("preview", "--base", "master", "--repeats", "5")
    assert previewed.returncode == 0, previewed.stdout[-2000:] + previewed.stderr[-2000:]
    comment = (repo / "ci-bench-preview" / "comment.md").read_text()
    assert comment.startswith("<!-- ci-bench sticky: benchmark|pr 1 -->\n")
    assert "<!-- ci-bench section: verdict -->" in comment
    assert re.search(r"lowers? for TPU", comment)
    assert f"{HOMEPAGE}/blob/v{__version__}/docs/VERDICTS.md" in comment
