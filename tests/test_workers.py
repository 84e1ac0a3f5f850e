"""Cases in worker processes: a hang, a segfault and an exit cost one case, not the run;
a killed run resumes; several workers share one queue."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ci_bench.errors import ExitCode
from ci_bench.measure.workers import (
    _tail,
    accelerator_present,
    death,
    default_workers,
    pin_env,
)
from ci_bench.schema import RESULTS_READABLE, Results
from ci_bench.store.files import read_model
from tests.conftest import FIXTURES, REPO, run_cli, write_project
from tests.harness.factories import CPU, V5E


def load(path) -> Results:
    return read_model(path, Results, what="results", schema_version=RESULTS_READABLE)


def test_hang_segfault_and_exit_are_one_error_each_and_the_rest_is_measured(tmp_path):
    kernels = ["tiny_matmul", "hang_kernel", "segfault_kernel", "exit_kernel"]
    write_project(tmp_path, kernels)
    out = tmp_path / "r.json"
    done = run_cli(
        "run",
        "--case-timeout",
        "20",  # generous for a loaded CI machine; only the hanging case waits it out
        "--workers",
        "2",
        "--repeats",
        "3",
        "-o",
        str(out),
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == ExitCode.FAILED, done.stderr  # errors fail by default policy
    results = load(out)
    assert results.meta.complete
    by_id = {c.id: c for c in results.cases}
    assert by_id["hang/B1-M128-K128-N128/float32"].error == "timed out after 20 s"
    segv = by_id["segfault/B1-M128-K128-N128/float32"].error
    assert segv.startswith("worker killed by signal SIGSEGV: Fatal Python error: Segmentation")
    assert "string_at" in segv  # the innermost frame from the worker's stderr
    assert by_id["exit/B1-M128-K128-N128/float32"].error.startswith("worker exited with code 3")
    ok = [c for c in results.cases if c.status == "ok"]
    assert [c.id for c in ok] == [
        "matmul/B1-M128-K128-N128/float32",
        "matmul/B1-M128-K128-N128/bfloat16",
    ]
    # two workers, yet the file lists cases in selection order, as one worker would
    listed = run_cli("list", cwd=tmp_path)
    assert [c.id for c in results.cases] == [
        line for line in listed.stdout.splitlines() if not line.startswith("#")
    ]
    # and the table (the report of a run) was written
    assert "timed out after 20 s" in done.stdout


def test_a_killed_run_resumes_measuring_only_the_rest(tmp_path):
    write_project(tmp_path, ["tiny_matmul", "slow_kernel"])
    out = tmp_path / "r.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(FIXTURES)])}
    args = [sys.executable, "-m", "ci_bench.commands.cli", "run", "--repeats", "2", "-q"]
    proc = subprocess.Popen([*args, "-o", str(out)], cwd=tmp_path, env=env)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if out.exists() and len(json.loads(out.read_text())["cases"]) >= 2:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    first = load(out)
    assert not first.meta.complete
    kept = {c.id: c for c in first.cases}
    assert 2 <= len(kept) < 4
    # As a user writes it: resume the file and write it again (the output defaults to it).
    done = run_cli(
        "run", "--repeats", "2", "--resume", str(out), "-o", str(out), cwd=tmp_path, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert f"{len(kept)} case(s) already measured" in done.stderr
    assert f"[{4 - len(kept)}/{4 - len(kept)}]" in done.stderr
    assert "[4/4]" not in done.stderr
    final = load(out)
    assert final.meta.complete
    assert [c.id for c in final.cases] == [
        "matmul/B1-M128-K128-N128/float32",
        "matmul/B1-M128-K128-N128/bfloat16",
        "slow/B1-M128-K128-N128/float32",
        "slow/B1-M128-K128-N128/bfloat16",
    ]
    for c in final.cases:  # what was measured before is kept as it was, not re-measured
        if c.id in kept:
            assert c == kept[c.id]
    # a file of other settings is refused in one line
    again = run_cli("run", "--repeats", "3", "--resume", str(out), cwd=tmp_path)
    assert again.returncode == ExitCode.USAGE
    assert "cannot resume: measured with other settings: repeats 2 (now 3)" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1


def test_profiler_timer_end_to_end_records_the_timer_and_dispatch(tmp_path):
    write_project(tmp_path, ["tiny_matmul"])
    out = tmp_path / "r.json"
    done = run_cli("run", "--timer", "profiler", "--repeats", "3", "-o", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    results = load(out)
    assert results.meta.settings.timer == "profiler"
    for c in results.cases:
        assert c.dispatch["pallas"].device_median_ms == pytest.approx(c.pallas.median_ms)
        assert c.dispatch["native"].device_median_ms == pytest.approx(c.native.median_ms)


def test_pinning_gives_each_worker_one_accelerator():
    assert pin_env("gpu", 3) == {"CUDA_VISIBLE_DEVICES": "3"}
    tpu = pin_env("tpu", 2)
    assert tpu["TPU_VISIBLE_CHIPS"] == "2"
    assert tpu["TPU_CHIPS_PER_PROCESS_BOUNDS"] == tpu["TPU_PROCESS_BOUNDS"] == "1,1,1"
    assert pin_env("tpu", 1)["TPU_PROCESS_PORT"] != pin_env("tpu", 0)["TPU_PROCESS_PORT"]
    assert pin_env("cpu", 1) == {}
    assert default_workers(CPU) == 1
    assert default_workers(V5E.model_copy(update={"device_count": 8})) == 8


def test_how_a_worker_died_is_named():
    assert death(-signal.SIGKILL) == "killed by signal SIGKILL"
    assert death(3) == "exited with code 3"
    assert _tail("a\nb\n\nc\nd\ne\n") == "b | c | d | e"
    assert _tail("") == "(no stderr)"


def test_the_fingerprint_is_read_in_a_child_only_where_an_accelerator_could_be_held(tmp_path):
    assert not accelerator_present({}, tmp_path)
    (tmp_path / "accel0").touch()
    assert accelerator_present({}, tmp_path)
    assert not accelerator_present({"JAX_PLATFORMS": "cpu"}, tmp_path)
    (tmp_path / "accel0").unlink()
    (tmp_path / "nvidia1").touch()
    assert accelerator_present({}, tmp_path)


def test_a_workers_stderr_reaches_the_ci_log_only_through_the_output_edge(tmp_path):
    """What a kernel writes to its worker's stderr (a workflow command, a U+0085 break) is
    kept in the case's error but never printed as a line the runner reads as a command."""
    from tests.harness.fuzz_outputs import injection_problem

    write_project(tmp_path, ["noisy_stderr_kernel"])
    out = tmp_path / "r.json"
    args = ("run", "--repeats", "2", "--warmup", "0", "-o", str(out))
    done = run_cli(*args, cwd=tmp_path, env={"GITHUB_ACTIONS": "true"}, timeout=300)
    assert done.returncode == ExitCode.NOTHING_MEASURED, done.stderr
    (case,) = load(out).cases
    assert case.error is not None
    assert "::set-output name=verdict::pass" in case.error  # kept, for the person reading
    assert "add-mask::secret" in case.error
    assert "set-output name=verdict" in done.stdout + done.stderr
    assert injection_problem(done.stdout) is None, done.stdout
    assert injection_problem(done.stderr) is None, done.stderr


BUSY_THEN_SERVE = """
import os, sys
left = int(open(os.environ["BUSY_FILE"]).read())
if left:
    open(os.environ["BUSY_FILE"], "w").write(str(left - 1))
    sys.stderr.write("RuntimeError: Unable to initialize backend 'tpu': TPU initialization "
                     "failed: open(/dev/vfio/1): Device or resource busy\\n")
    sys.exit(1)
from ci_bench.measure.serve import serve; serve()
"""


def _busy_pool(tmp_path, busy: int, wait: float):
    """A pool whose workers find the chip busy ``busy`` times, as libtpu says it."""
    from ci_bench.contract.spec import Case
    from ci_bench.measure.workers import Job, Pool, WorkerSetup
    from ci_bench.pipeline.kernels import read_device

    counter = tmp_path / "busy"
    counter.write_text(str(busy))
    device = read_device(os.environ)
    setup = WorkerSetup(
        modules=["tiny_matmul"],
        root=str(tmp_path),
        settings={"warmup": 0, "repeats": 2, "seed": 0},
        device=device.model_dump(mode="json"),
    )
    env = {
        **os.environ,
        "BUSY_FILE": str(counter),
        "PYTHONPATH": os.pathsep.join([str(REPO), str(FIXTURES)]),
    }
    pool = Pool(setup, [{}], case_timeout=120, env=env, busy_wait=wait, worker_code=BUSY_THEN_SERVE)
    case = Case("matmul", {"B": 1, "M": 128, "K": 128, "N": 128}, "float32")
    found: list = []

    def failed(job, why):
        raise AssertionError(f"the case's worker failed: {why}")

    try:
        pool.run([Job(case)], failed, lambda i, rs: found.extend(rs), lambda i: None)
    finally:
        pool.close()
    return found, counter


def test_a_worker_that_finds_the_chip_busy_is_started_again_until_it_is_free(tmp_path):
    """Issue 50: the next job after a cancelled one found the chip busy for about 20 s."""
    found, counter = _busy_pool(tmp_path, busy=2, wait=60)
    assert counter.read_text() == "0"  # it was busy twice, then started
    (result,) = found
    assert result.status == "ok", result.error


def test_a_chip_busy_past_the_wait_is_one_clear_error(tmp_path):
    from ci_bench.measure.workers import WorkerError

    with pytest.raises(WorkerError, match=r"the accelerator stayed busy for 1 s: another process"):
        _busy_pool(tmp_path, busy=1000, wait=1)
