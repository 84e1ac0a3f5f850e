"""Issue 15's reproductions, store side: the baseline folder is a database, not a hope."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ci_bench.errors import InputError
from ci_bench.store.baselines import baseline_path, find_baseline, write_promotions
from ci_bench.store.files import dump_model
from tests.conftest import FIXTURES, REPO
from tests.harness.factories import CPU, case, results
from tests.harness.inproc import assert_one_line_error, call

ID = "matmul/B1-M128-K128-N128/float32"


def results_on(tmp_path: Path, name: str, cpu_model: str) -> Path:
    device = CPU.model_copy(update={"cpu_model": cpu_model})
    path = tmp_path / name
    path.write_text(dump_model(results([case(ID)], device=device)))
    return path


def test_concurrent_promotions_never_lose_an_entry(tmp_path):
    """Real ``ci-bench promote`` processes at once: every device's entry survives."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(FIXTURES)])}
    devices = [f"CPU {i}" for i in range(6)]
    files = [results_on(tmp_path, f"r{i}.json", d) for i, d in enumerate(devices)]
    for trial in range(2):
        folder = tmp_path / f"b{trial}"
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "ci_bench.commands.cli",
                    "promote",
                    str(f),
                    "--baselines-dir",
                    str(folder),
                ],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for f in files
        ]
        outputs = [p.communicate(timeout=120) for p in procs]
        assert all(p.returncode == 0 for p in procs), outputs
        created = sum("created:" in out for out, _ in outputs)
        assert created == 1, outputs
        stored = json.loads((folder / "matmul_v0.1.0.json").read_text())
        assert sorted(e["device"]["cpu_model"] for e in stored["entries"]) == devices
        assert not [p for p in folder.iterdir() if p.name != "matmul_v0.1.0.json"], "leftovers"


def test_a_non_finite_value_is_refused_before_writing(tmp_path):
    from ci_bench.store.baselines import plan_promotions

    good = case(ID)
    bad = good.model_copy(update={"tflops": math.inf})
    res = results([good]).model_copy(update={"cases": [bad]})
    from datetime import UTC, datetime

    promotions = plan_promotions(
        res, {}, promoted_at=datetime.now(UTC), tag=None, force=False, source="r.json"
    )
    with pytest.raises(InputError, match="finite"):
        write_promotions(tmp_path, promotions)
    assert list(tmp_path.iterdir()) == []


def test_what_promote_writes_is_readable_back(tmp_path):
    source = results_on(tmp_path, "r.json", "CPU A")
    folder = tmp_path / "b"
    assert call("promote", str(source), "--baselines-dir", str(folder), cwd=tmp_path).code == 0
    outcome = call("compare", str(source), "--baselines-dir", str(folder), cwd=tmp_path)
    assert outcome.code == 0, outcome.err


def test_kernel_names_cannot_leave_the_baselines_folder(tmp_path):
    for name in ("../../escaped", "/tmp/abs", "a/b", ".hidden", "x" * 300):
        with pytest.raises(InputError):
            baseline_path(tmp_path, name, "0.1.0")
    with pytest.raises(InputError):
        baseline_path(tmp_path, "matmul", "../../0.1.0")


@pytest.mark.parametrize("kind", ["directory", "loop", "dangling", "unreadable", "version"])
def test_a_broken_store_is_an_error_not_a_missing_baseline(tmp_path, kind):
    source = results_on(tmp_path, "r.json", "CPU A")
    folder = tmp_path / "b"
    folder.mkdir()
    target = folder / "matmul_v0.1.0.json"
    if kind == "directory":
        target.mkdir()
    elif kind == "loop":
        target.symlink_to(folder / "matmul_v0.1.0.json")
    elif kind == "dangling":
        target.symlink_to(folder / "nowhere.json")
    elif kind == "unreadable":
        if os.geteuid() == 0:
            pytest.skip("root reads any file")
        target.write_text("{}")
        target.chmod(0)
    else:
        target.write_text(json.dumps({"schema_version": 99, "kernel": "matmul"}))
    outcome = call("compare", str(source), "--baselines-dir", str(folder), cwd=tmp_path)
    assert_one_line_error(outcome, "matmul_v0.1.0.json")


def test_a_broken_older_version_is_an_error_too(tmp_path):
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "matmul_v0.0.9.json").mkdir()
    with pytest.raises(InputError, match="not a regular file"):
        find_baseline(folder, "matmul", "0.1.0")


def test_an_explicit_baselines_dir_that_does_not_exist_is_an_error(tmp_path):
    source = results_on(tmp_path, "r.json", "CPU A")
    outcome = call("compare", str(source), "--baselines-dir", str(tmp_path / "typo"), cwd=tmp_path)
    assert_one_line_error(outcome, "--baselines-dir", "does not exist")


def test_no_baseline_yet_stays_new(tmp_path):
    source = results_on(tmp_path, "r.json", "CPU A")
    folder = tmp_path / "b"
    folder.mkdir()
    report = tmp_path / "report.json"
    outcome = call(
        "compare", str(source), "--baselines-dir", str(folder), "-o", str(report), cwd=tmp_path
    )
    assert outcome.code == 0, outcome.err
    assert {c["verdict"] for c in json.loads(report.read_text())["cases"]} == {"new"}


def test_the_default_baselines_folder_may_be_absent(tmp_path):
    source = results_on(tmp_path, "r.json", "CPU A")
    outcome = call("compare", str(source), cwd=tmp_path)
    assert outcome.code == 0, outcome.err
