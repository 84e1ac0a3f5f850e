"""The merge base is really the merge base (issue 37): ``ab --base`` and ``analyze --base``
compare two versions of a library's code, whatever its layout.

Each layout of tests/harness/layouts.py gets the issue's pull request: the kernel alone
changed, four times the grid steps (a few times slower in the CPU interpreter). The A/B must
call it a regression and the cost model a structural change; a pull request that leaves the
kernel alone must read as no change; a kernel imported from outside the repository is
named (``same-code``), never read as "no change".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ci_bench.errors import ExitCode
from tests.conftest import run_cli
from tests.harness.layouts import LAYOUTS, env_for, git, kernel_path, slower, write_layout

CASE = "scale/M512-N256/float32"


def _ab(repo: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = repo.parent / f"{repo.name}-ab.json"
    done = run_cli("ab", "--base", "main", "-o", str(out), cwd=repo, env=env)
    assert done.returncode in (ExitCode.OK, ExitCode.FAILED), done.stderr[-3000:]
    return done, json.loads(out.read_text())


def _slowdown_seen(done: subprocess.CompletedProcess[str], verdict: dict) -> None:
    """The head's kernel measured several times slower than the base's: the proof that
    each side ran its own copy (one copy for both reads about 1.0). A regression, or, on a
    loaded machine, the same change not confirmed by the re-measurement (``noisy``): which
    one a shared machine gives is its load, not the isolation under test."""
    assert verdict["ratio_low"] > 1.3, verdict["reason"]  # four times the steps
    if verdict["verdict"] == "regression":
        assert done.returncode == ExitCode.FAILED
    else:
        assert verdict["verdict"] == "noisy", verdict["reason"]
        assert "not reproduced when re-measured" in verdict["reason"]


def _analyze(repo: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], dict]:
    done = run_cli("analyze", "--base", "main", "--format", "json", "-q", cwd=repo, env=env)
    assert done.returncode in (ExitCode.OK, ExitCode.FAILED), done.stderr[-3000:]
    return done, json.loads(done.stdout)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_kernel_only_slowdown_is_a_regression_and_a_structural_change_in_every_layout(
    tmp_path, layout
):
    repo = write_layout(tmp_path / "lib", layout)
    env = env_for(repo, layout)
    slower(repo, layout)

    done, report = _ab(repo, env)
    (verdict,) = report["cases"]
    _slowdown_seen(done, verdict)
    # The proof, per run: each side traced its kernel from its own checkout's copy.
    (kernel,) = report["kernels"]
    sources = kernel["sources"]
    assert sources["changed"] == [kernel_path(layout)]
    head = {f["path"]: f for f in sources["head"] if f["kernel"]}
    base = {f["path"]: f for f in sources["base"] if f["kernel"]}
    assert set(head) == set(base) == {kernel_path(layout)}
    assert head[kernel_path(layout)]["inside"]
    assert base[kernel_path(layout)]["inside"]
    assert head[kernel_path(layout)]["sha256"] != base[kernel_path(layout)]["sha256"]
    assert report["run_states"] == []

    done, analysis = _analyze(repo, env)
    assert done.returncode == ExitCode.FAILED
    assert analysis["verdict"] == "structural"
    (case,) = analysis["cases"]
    assert case["against"]["verdict"] == "structural"
    assert case["against"]["steps_ratio"] == pytest.approx(4.0)


@pytest.mark.parametrize("layout", ["package", "pyfile"])
def test_a_pull_request_that_leaves_the_kernel_alone_reads_as_no_change(tmp_path, layout):
    repo = write_layout(tmp_path / "lib", layout)
    env = env_for(repo, layout)
    git(repo, "checkout", "-q", "-b", "docs")
    (repo / "NOTES.md").write_text("docs only\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "docs")

    done, analysis = _analyze(repo, env)
    assert done.returncode == ExitCode.OK, done.stderr[-2000:]
    assert analysis["verdict"] == "pass"
    assert analysis["run_states"] == []
    (case,) = analysis["cases"]
    assert case["against"]["verdict"] == "pass"
    assert case["against"]["grid_steps"] == 0
    if layout == "package":
        done, report = _ab(repo, env)
        (verdict,) = report["cases"]
        assert verdict["verdict"] in ("pass", "noisy"), verdict["reason"]
        assert report["kernels"][0]["sources"]["changed"] == []


def _installed(tmp_path: Path, repo: Path, *, editable: bool) -> dict[str, str]:
    """The library installed (``pip install [-e] .``) into a prefix that a sitecustomize
    puts on the path, as a CI step's install would: the environment for the CLI."""
    with (repo / "pyproject.toml").open("a") as handle:
        handle.write(
            '\n[build-system]\nrequires = ["setuptools>=64"]\n'
            'build-backend = "setuptools.build_meta"\n\n'
            '[project]\nname = "mylib"\nversion = "0.1.0"\n\n'
            '[tool.setuptools.packages.find]\nwhere = ["src"]\n'
        )
    git(repo, "commit", "-q", "-am", "packaging")
    prefix = tmp_path / "prefix"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--prefix", str(prefix)]
    installed = subprocess.run(
        [*pip, *(["-e"] if editable else []), str(repo)],
        capture_output=True,
        text=True,
        check=False,
    )
    if installed.returncode != 0:
        pytest.skip(f"no package install here: {installed.stderr.strip()[-300:]}")
    (site,) = prefix.glob("lib/python*/site-packages")
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(f"import site\nsite.addsitedir({str(site)!r})\n")
    return {"PYTHONPATH": str(hook)}


def test_an_installed_copy_of_the_repositorys_kernel_is_named_never_no_change(tmp_path):
    """``pip install .`` (not ``-e``) of a ``src/`` library: both sides import the copy in
    site-packages, not the checkouts' own; the run names both files and fails."""
    repo = write_layout(tmp_path / "lib", "src")
    env = _installed(tmp_path, repo, editable=False)
    slower(repo, "src")

    done, report = _ab(repo, env)
    assert done.returncode == ExitCode.FAILED  # fail-on.same-code, by default
    (state,) = report["run_states"]
    assert state["state"] == "same-code"
    assert "site-packages/mylib/kernels/scale.py" in state["reason"]
    assert f"not the repository's {kernel_path('src')}" in state["reason"]
    assert report["verdict"] == "same-code"
    assert "same-code: scale: base and head both ran the installed" in " ".join(done.stdout.split())

    done, analysis = _analyze(repo, env)
    assert done.returncode == ExitCode.FAILED
    assert analysis["verdict"] == "same_code"
    assert [s["state"] for s in analysis["run_states"]] == ["same-code"]
    allowed = run_cli(
        "analyze", "--base", "main", "--fail-on", "structural", "-q", cwd=repo, env=env
    )
    assert allowed.returncode == ExitCode.OK, allowed.stderr[-2000:]  # the policy says


def test_a_kernel_the_repository_does_not_hold_is_named_as_a_dependency(tmp_path):
    """The kernel package lives outside the checkout with no copy in it (a dependency): the
    pull request cannot change it, so nothing fails, but the run says where it came from."""
    repo = write_layout(tmp_path / "lib", "package")
    vendor = tmp_path / "vendor"
    shutil.copytree(repo / "mylib", vendor / "mylib")
    git(repo, "rm", "-q", "-r", "mylib")
    git(repo, "commit", "-q", "-m", "mylib comes from elsewhere now")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "NOTES.md").write_text("a change\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a change")
    kernel = str((vendor / "mylib" / "kernels" / "scale.py").resolve())

    done, report = _ab(repo, {"PYTHONPATH": str(vendor)})
    assert report["run_states"] == []
    (summary,) = report["kernels"]
    (warning,) = summary["warnings"]
    assert f"the kernel comes from outside the repository ({kernel})" in warning
    assert f"warning: {warning[:40]}" in done.stdout


def _linked_out(
    repo: Path, inside: str, outside: Path, config: str | None = None, relative: bool = False
) -> None:
    """``inside`` (a file of the repository) moved to ``outside`` and committed as a
    symbolic link to it, on main: absolute, the same target from every checkout."""
    outside.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(repo / inside, outside)
    link = repo / inside
    link.symlink_to(os.path.relpath(outside, link.parent) if relative else outside)
    if config is not None:
        pyproject = repo / "pyproject.toml"
        pyproject.write_text(pyproject.read_text().replace('"bench.scale_spec"', config))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"{inside} is a link now")


def _spec_linked_out(tmp_path: Path, *, relative: bool) -> Path:
    """The package layout whose config names a SPEC file linked out of the repository, and
    the pull request that slows its kernel down."""
    repo = write_layout(tmp_path / "lib", "package")
    spec = tmp_path / "elsewhere" / "scale_spec.py"
    _linked_out(
        repo, "bench/scale_spec.py", spec, config='"bench/scale_spec.py"', relative=relative
    )
    slower(repo, "package")
    return repo


def test_a_spec_linked_out_of_the_repository_still_runs_each_sides_kernel(tmp_path):
    """Issue 54 D4: the config names a SPEC file that links out of the repository. The SPEC
    was read at its target, one module for both sides, so the base ran the head's kernel:
    "same-code ... could not isolate it (please report it)". Each side's SPEC is its
    checkout's file, whatever it links to, and imports that checkout's kernel."""
    repo = _spec_linked_out(tmp_path, relative=False)

    done, report = _ab(repo, {})
    assert report["run_states"] == [], report["run_states"]
    (verdict,) = report["cases"]
    _slowdown_seen(done, verdict)


def test_a_relative_link_out_of_the_repository_is_named_and_the_head_measured_alone(tmp_path):
    """A relative link out of the repository dangles in the base's checkout, elsewhere on
    disk: the base read "has none of the kernels", exit 2. The link is named, and the head
    is measured alone."""
    repo = _spec_linked_out(tmp_path, relative=True)

    done, report = _ab(repo, {})
    assert done.returncode == ExitCode.OK, done.stderr[-2000:]
    (case,) = report["cases"]
    assert case["verdict"] == "new"
    assert (
        "a symbolic link to ../../elsewhere/scale_spec.py, which does not exist" in case["reason"]
    )
    assert case["reason"].endswith("head measured alone")


def test_a_kernel_file_linked_out_of_the_repository_is_named_as_a_link(tmp_path):
    """Issue 54 D4: the kernel file itself links out of the repository, so both sides run
    that one file. The run said so as an installed copy, advising ``pip install -e .``,
    which changes nothing here: it names the link."""
    repo = write_layout(tmp_path / "lib", "package")
    target = tmp_path / "elsewhere" / "scale.py"
    _linked_out(repo, kernel_path("package"), target)
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "NOTES.md").write_text("a change\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a change")

    done, report = _ab(repo, {})
    assert done.returncode == ExitCode.FAILED  # fail-on.same-code, by default
    (state,) = report["run_states"]
    assert state["state"] == "same-code"
    assert state["reason"].startswith(
        f"scale: the repository's {kernel_path('package')} is a symbolic link out of it "
        f"(to {target.resolve()})"
    ), state["reason"]
    assert "pip install" not in state["reason"]


def test_an_editable_install_of_the_repository_is_isolated_too(tmp_path):
    """``pip install -e .`` of the library (setuptools' editable finder maps ``mylib`` to
    the head's checkout, whatever ``sys.path`` says): the base still runs its own copy."""
    repo = write_layout(tmp_path / "lib", "src")
    env = _installed(tmp_path, repo, editable=True)
    probe = subprocess.run(
        [sys.executable, "-c", "import mylib; print(mylib.__file__)"],
        cwd=tmp_path,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip() == str(repo / "src" / "mylib" / "__init__.py")
    slower(repo, "src")

    done, report = _ab(repo, env)
    (verdict,) = report["cases"]
    _slowdown_seen(done, verdict)
    sources = report["kernels"][0]["sources"]
    assert sources["changed"] == [kernel_path("src")]
    head = {f["path"]: f["sha256"] for f in sources["head"] if f["kernel"]}
    base = {f["path"]: f["sha256"] for f in sources["base"] if f["kernel"]}
    assert head.keys() == base.keys() == {kernel_path("src")}
    assert head != base  # the base traced its own copy, not the editable install's head
    assert report["run_states"] == []


WRONG_AT_256 = """
_scale = scale


def scale(x):  # a tolerance this kernel misses at M=256, at the merge base already
    return _scale(x) + (1e-3 if x.shape[0] == 256 else 0.0)
"""


def test_failures_the_merge_base_has_are_inherited_and_the_prs_own_are_errors(tmp_path):
    repo = write_layout(tmp_path / "lib", "package")
    kernel = repo / kernel_path("package")
    kernel.write_text(kernel.read_text() + WRONG_AT_256)
    spec = repo / "bench" / "scale_spec.py"
    points = '({"M": 512, "N": 256}, {"M": 256, "N": 256}, {"M": 128, "N": 256})'
    spec.write_text(spec.read_text().replace('({"M": 512, "N": 256},)', points))
    git(repo, "commit", "-q", "-am", "three cases, one failing")
    slower(repo, "package")
    # The pull request also breaks M=128 (the merge base is right there).
    text = kernel.read_text().replace("x.shape[0] == 256", "x.shape[0] in (256, 128)")
    kernel.write_text(text)
    git(repo, "commit", "-q", "-am", "kernel: M=128 broken too")

    done, report = _ab(repo, {})
    by_id = {v["id"]: v for v in report["cases"]}
    assert by_id["scale/M512-N256/float32"]["verdict"] == "regression"
    assert by_id["scale/M128-N256/float32"]["verdict"] == "error"  # this PR's doing
    inherited = by_id["scale/M256-N256/float32"]
    assert inherited["verdict"] == "inherited", inherited["reason"]
    assert inherited["reason"].endswith("(the same at the merge base)")
    assert report["counts"]["inherited"] == 1
    assert done.returncode == ExitCode.FAILED
