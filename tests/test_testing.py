"""The pytest helper for the specification's test_no_regression, run inside a real pytest."""

from __future__ import annotations

import json
import textwrap

import jax
import jax.numpy  # noqa: F401  (numpy.fft, a C extension, also loads only once)
import pytest
import scipy.stats  # noqa: F401

from ci_bench.measure.devices import fingerprint
from ci_bench.store.files import dump_model
from tests.conftest import REPO, run_cli, write_project
from tests.harness.factories import case, results

CASE = "matmul/B1-M128-K128-N128/float32"

TEST_FILE = textwrap.dedent(
    f"""
    from ci_bench.testing import accelerator, assert_no_regression

    @accelerator
    def test_no_regression():
        assert_no_regression("kernels.matmul", "{CASE}", repeats=5, warmup=1)
    """
)


def make_baseline(folder, scale_ms: float) -> None:
    """A stored baseline for this machine whose samples are all ``scale_ms``."""
    res = results([case(CASE, scale_ms, spread=0.0)], device=fingerprint())
    path = folder / "r.json"
    path.write_text(dump_model(res))
    done = run_cli("promote", str(path), "--baselines-dir", str(folder / "baselines"), cwd=folder)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def kernel_library(pytester, monkeypatch):
    write_project(pytester.path, ["kernels.matmul"])
    pytester.syspathinsert(REPO)
    # A kernel library's tests import its own package; this repository's `kernels/` is not
    # installed (the wheel holds ci_bench only), so the subprocess gets it on its path.
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    pytester.makepyfile(test_perf=TEST_FILE)
    return pytester


def test_marked_tests_are_skipped_visibly_on_cpu(kernel_library):
    result = kernel_library.runpytest_subprocess("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*needs a TPU or GPU runner (jax backend here: cpu)*"])


def test_passes_against_a_slower_baseline(kernel_library):
    make_baseline(kernel_library.path, 1e6)
    result = kernel_library.runpytest_subprocess("--run-accelerator")
    result.assert_outcomes(passed=1)


def test_fails_with_the_specification_message_against_a_much_faster_baseline(kernel_library):
    make_baseline(kernel_library.path, 1e-6)
    result = kernel_library.runpytest_subprocess("--run-accelerator")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Performance regression: *ms vs baseline 0.000ms*"])


def test_no_baseline_for_this_device_is_a_visible_skip(kernel_library):
    make_baseline(kernel_library.path, 1.0)
    path = kernel_library.path / "baselines" / "matmul_v0.1.0.json"
    doc = json.loads(path.read_text())
    doc["entries"][0]["device"]["cpu_model"] = "Some Other CPU"
    path.write_text(json.dumps(doc))
    result = kernel_library.runpytest_subprocess("--run-accelerator", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no baseline for cpu:cpu:*"])
