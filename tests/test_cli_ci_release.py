"""``ci-bench ci`` and ``comment`` end to end: real CLI, real PyGithub, a real HTTP server.

Events come from GitHub's webhook examples (tests/fixtures/events); every request the tool
sends is validated against GitHub's OpenAPI description by the fake server
(tests/harness/cli_ci.py).
This file: a tag push promotes baselines (kernel and library tags).
"""

from __future__ import annotations

import json
import re

from ci_bench.errors import ExitCode
from kernels.matmul import VERSION
from tests.conftest import run_cli
from tests.harness import cli_ci
from tests.harness.cli_ci import RELEASE, REPO, gh
from tests.harness.cli_ci_events import tag_env
from tests.harness.factories import case, results

server, workspace = cli_ci.server, cli_ci.workspace


def test_a_tag_promotes_once_and_a_rerun_changes_nothing(server, workspace):
    env = tag_env(server, workspace, f"matmul-v{VERSION}")
    cli_ci.commit_all(workspace, "the release")  # the tag's checkout: nothing uncommitted
    first = run_cli("ci", *RELEASE, cwd=workspace, env=env)
    assert first.returncode == 0, first.stderr
    files = server.files(REPO)
    doc = json.loads(files[f"baselines/matmul_v{VERSION}.json"])
    assert doc["entries"][0]["provenance"]["tag"] == f"matmul-v{VERSION}"
    assert doc["entries"][0]["provenance"]["dirty"] is False  # the tag's own checkout
    assert "uncommitted" not in first.stdout
    assert len(server.commits) == 1
    assert f"matmul-v{VERSION}" in server.commits[0].message
    assert "cpu:cpu:" in server.commits[0].message
    again = run_cli("ci", *RELEASE, cwd=workspace, env=env)
    assert again.returncode == 0, again.stderr
    assert "unchanged" in again.stdout
    assert len(server.commits) == 1
    assert server.files(REPO) == files


def test_a_tag_measured_on_a_dirty_checkout_says_so(server, workspace):
    """A step before the release run changed a tracked file (here the project's config):
    the promoted entry records it and the job's summary says what that means."""
    env = tag_env(server, workspace, f"matmul-v{VERSION}")
    cli_ci.commit_all(workspace, "the release")
    config = workspace / "pyproject.toml"
    config.write_text(config.read_text() + "\n# edited by a step before the run\n")
    done = run_cli("ci", *RELEASE, cwd=workspace, env=env)
    assert done.returncode == 0, done.stderr
    doc = json.loads(server.files(REPO)[f"baselines/matmul_v{VERSION}.json"])
    assert doc["entries"][0]["provenance"]["dirty"] is True
    assert "- note: measured with uncommitted changes on " in done.stdout
    assert "ci-bench remodel of this entry needs --at" in done.stdout


def test_a_concurrent_change_is_merged_not_overwritten(server, workspace):
    other = results([case("matmul/B1-M128-K128-N128/float32", version=VERSION)])
    other = other.model_copy(
        update={
            "meta": other.meta.model_copy(
                update={
                    "device": other.meta.device.model_copy(
                        update={"device_kind": "TPU v6 lite", "platform": "tpu"}
                    )
                }
            )
        }
    )
    from ci_bench.store.baseline_text import render_baseline
    from ci_bench.store.baselines import BaselineFile, entry_from_results

    entry = entry_from_results(other, "matmul", other.meta.started_at, "v0.0.9")
    remote = render_baseline(BaselineFile(kernel="matmul", version=VERSION, entries=[entry]))
    repo = gh(server).get_repo(REPO)
    repo.create_file(f"baselines/matmul_v{VERSION}.json", "v6e numbers", remote, branch="main")
    server.fail_next("PUT", rf"/contents/baselines/matmul_v{re.escape(VERSION)}\.json$", 409)
    done = run_cli("ci", *RELEASE, cwd=workspace, env=tag_env(server, workspace, "v0.1.0"))
    assert done.returncode == 0, done.stderr
    doc = json.loads(server.files(REPO)[f"baselines/matmul_v{VERSION}.json"])
    kinds = [e["device"]["device_kind"] for e in doc["entries"]]
    assert kinds == ["TPU v6 lite", "cpu"]


def test_promotion_through_a_pull_request(server, workspace):
    env = tag_env(server, workspace, "v0.1.0")
    done = run_cli("ci", *RELEASE, "--promote-via", "pull-request", cwd=workspace, env=env)
    assert done.returncode == 0, done.stderr
    assert "pull request:" in done.stdout
    assert f"baselines/matmul_v{VERSION}.json" in server.files(REPO, "ci-bench/baselines-v0.1.0")
    assert f"baselines/matmul_v{VERSION}.json" not in server.files(REPO)
    again = run_cli("ci", *RELEASE, "--promote-via", "pull-request", cwd=workspace, env=env)
    assert again.returncode == 0, again.stderr
    pulls = [r for r in server.requests if r.method == "POST" and r.path.endswith("/pulls")]
    assert len(pulls) == 1


def test_a_kernel_tag_must_match_the_kernel_version(server, workspace):
    done = run_cli("ci", *RELEASE, cwd=workspace, env=tag_env(server, workspace, "matmul-v9.9.9"))
    assert done.returncode == ExitCode.USAGE
    assert f"declares version {VERSION}, not 9.9.9" in done.stderr
    assert server.commits == []


def test_a_library_tag_keeps_numbers_of_kernel_versions_it_did_not_bump(server, workspace):
    first = run_cli("ci", *RELEASE, cwd=workspace, env=tag_env(server, workspace, "v0.1.0"))
    assert first.returncode == 0, first.stderr
    files = server.files(REPO)
    second = run_cli("ci", *RELEASE, cwd=workspace, env=tag_env(server, workspace, "v0.2.0"))
    assert second.returncode == 0, second.stderr
    assert f"unchanged: baselines/matmul_v{VERSION}.json" in second.stdout
    assert len(server.commits) == 1
    assert server.files(REPO) == files
