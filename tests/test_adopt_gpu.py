"""Adopting ci-bench for NVIDIA GPU runners: ``ci-bench init --platform gpu`` and the caller
workflows it writes, run through the workflows' own steps (``tests/harness/workflow_runner``):
the measuring jobs go to the self-hosted ``gpu`` runners with jax's CUDA toolchain pinned by
``constraints/gpu.txt``; the lower job, on a CPU runner, lowers for CUDA as the GPUs of
``target-chips``. Nothing here needs a GPU: the jobs run on this CPU (interpret mode), the
install steps are the emulation's (what they would install is checked, not installed)."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest

from ci_bench.schema.gpus import GPU_NAMES
from tests.conftest import run_cli
from tests.harness import forkserver
from tests.harness.adopt import PIN
from tests.harness.github_server import FakeGitHub
from tests.harness.pipeline_repo import REPO, TOKEN, event, failures, git
from tests.harness.workflow_runner import Runner

GPU_ADOPTER = Path(__file__).parent / "fixtures" / "gpu_adopter"
NUMBER = 2


@pytest.fixture
def gpu_adopter(tmp_path):
    repo = tmp_path / "gpu-ops"
    shutil.copytree(GPU_ADOPTER, repo)
    git(repo, "init", "-q", "-b", "master")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "Dev")
    done = run_cli("init", "--platform", "gpu", "--pin", PIN, cwd=repo)
    assert done.returncode == 0, done.stderr
    with (repo / "pyproject.toml").open("a") as handle:
        handle.write("warmup = 1\nrepeats = 3\n\n[tool.ci-bench.github]\nretries = 1\n")
        handle.write("backoff = 0.01\nseconds-between-requests = 0\nseconds-between-writes = 0\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "adopt ci-bench for GPU runners")
    git(repo, "checkout", "-q", "--detach")
    return repo, done.stdout


def test_init_for_gpu_writes_gpu_callers_constraints_and_targets(gpu_adopter):
    repo, said = gpu_adopter
    benchmark = (repo / ".github/workflows/benchmark.yml").read_text()
    assert 'runner: \'["self-hosted", "gpu"]\'' in benchmark
    assert "install: -e . jax[cuda12]" in benchmark
    assert "constraints: constraints/gpu.txt" in benchmark
    release = (repo / ".github/workflows/release.yml").read_text()
    assert 'runner: \'["self-hosted", "gpu-trusted"]\'' in release
    pins = (repo / "constraints/gpu.txt").read_text()
    assert "jax==0.10.2\njaxlib==0.10.2\njax-cuda12-plugin==0.10.2\n" in pins
    assert "NVIDIA driver" in pins
    assert not (repo / "constraints/tpu.txt").exists()
    config = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["ci-bench"]
    assert config["kernels"] == ["gpu_ops.double"]
    assert config["target-chips"] == list(GPU_NAMES)
    assert "pull-request GPU runners (labels self-hosted, gpu)" in said
    assert "(self-hosted, gpu-trusted)" in said


@pytest.mark.slow
def test_the_gpu_callers_measure_on_gpu_runners_and_lower_for_cuda(gpu_adopter, tmp_path):
    repo, _ = gpu_adopter
    base = git(repo, "rev-parse", "master")
    with FakeGitHub(
        token=TOKEN, repos=(REPO,), login="github-actions[bot]", default_branch="master"
    ) as fake:
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
                "CI_BENCH_VENV": str(
                    forkserver.venv(tmp_path / "stand-in", {"JAX_PLATFORMS": "cpu"})
                ),
                "CI_BENCH_JAX_CACHE": str(tmp_path / "tool-cache" / "jax"),
            },
            variables={"CI_BENCH_PR_MODE": "baseline"},
            workflow_run_example=event("workflow_run_completed.json"),
            tool_cache=tmp_path / "tool-cache",
            workflows=repo / ".github" / "workflows",
            run_install=frozenset(),
            extra_env={"JAX_PLATFORMS": "cpu"},  # a CPU stands in for the GPU runner
        )
        git(repo, "checkout", "-q", "-B", "feature", "master")
        (repo / "NOTES.md").write_text("a change")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "a change")
        head = git(repo, "rev-parse", "HEAD")
        git(repo, "checkout", "-q", "--detach")
        fake.set_pull(REPO, NUMBER, head, base)
        payload = event(
            "pull_request_opened.json",
            **{"pull_request.head.sha": head, "repository.full_name": REPO},
        )
        payload["pull_request"]["base"]["sha"] = base
        payload["pull_request"]["labels"] = []

        [run] = runner.dispatch("pull_request_target", payload, "refs/heads/master", base)
        assert run.workflow == "benchmark.yml"
        assert "measure" in run.ran, failures(run)
        for job in run.job("measure"):
            assert json.loads(job.runs_on) == ["self-hosted", "gpu"]
            install = job.step("Install ci-bench and the kernels")
            assert install.inputs["requirements"].endswith(" -e . jax[cuda12]")
            assert install.inputs["constraints"] == "constraints/gpu.txt"
        assert run.result("report") == "success", failures(run)

        lowering = runner.dispatch("pull_request", payload, f"refs/pull/{NUMBER}/merge", head)
        lower = next(r for r in lowering if r.workflow == "lower.yml")
        assert lower.result("lower") == "success", failures(lower)
        (job,) = lower.job("lower")
        assert job.runs_on == "ubuntu-latest"  # a GitHub-hosted CPU runner, no GPU
        doc = json.loads(next(lower.artifacts.rglob("lowering.json")).read_text())
        assert doc["meta"]["platform"] == "cuda"
        assert doc["meta"]["chips"] == list(GPU_NAMES)
        (case,) = doc["cases"]
        assert (case["status"], case["kind"]) == ("ok", "triton")
        assert "cases lower for CUDA" in "\n".join(s.output for s in job.steps)
        fake.assert_no_violations()
