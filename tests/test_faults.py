"""Issue 15's reproductions, faults: partial runs, signals, internal errors, injection."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import ci_bench
from ci_bench.errors import ExitCode
from ci_bench.github.outputs import annotations
from ci_bench.judge.compare import compare
from ci_bench.report.comment import markdown_report
from ci_bench.report.escape import md_inline
from ci_bench.schema import FailPolicy, Thresholds
from ci_bench.store.baselines import Lookup
from ci_bench.store.files import dump_model
from kernels.matmul import VERSION as MATMUL_VERSION
from tests.conftest import FIXTURES, REPO, write_project
from tests.harness.factories import case, results
from tests.harness.inproc import call

ID = "matmul/B1-M128-K128-N128/float32"


def cli_process(*args: str, cwd: Path, extra_env: dict[str, str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(FIXTURES)]), **extra_env}
    return subprocess.Popen(
        [sys.executable, "-m", "ci_bench.commands.cli", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# --- an unfinished run never passes -----------------------------------------------------------


def test_an_unfinished_run_fails_the_gate(tmp_path):
    """Its never-measured cases are ``unmeasured``, which fails by default (exit 1)."""
    write_project(tmp_path, ["kernels.matmul"])
    other = "matmul/B4-M128-K256-N128/float32"
    res = results([case(ID)], matrix=[ID, other], complete=False)
    path = tmp_path / "r.json"
    path.write_text(dump_model(res))
    report = tmp_path / "report.json"
    outcome = call("compare", str(path), "-o", str(report), cwd=tmp_path)
    assert outcome.code == ExitCode.FAILED, outcome.err
    verdicts = {c["id"]: c["verdict"] for c in json.loads(report.read_text())["cases"]}
    assert verdicts[other] == "unmeasured"
    outcome = call("ci", "--results", str(path), "--out-dir", str(tmp_path / "o"), cwd=tmp_path)
    assert outcome.code == ExitCode.FAILED, outcome.err


def test_a_kernel_that_kills_the_process_never_gets_a_green_check(tmp_path):
    write_project(tmp_path, ["crashing_matmul"])
    out = tmp_path / "r.json"
    proc = cli_process(
        "run",
        "-q",
        "--repeats",
        "2",
        "--warmup",
        "0",
        "-o",
        str(out),
        cwd=tmp_path,
        extra_env={"CRASH_MODE": "exit"},
    )
    proc.communicate(timeout=300)
    saved = json.loads(out.read_text())
    outcome = call("compare", str(out), cwd=tmp_path)
    # killed mid-matrix: its second case is unmeasured; run isolated: it is an error
    assert outcome.code == ExitCode.FAILED, outcome.out + outcome.err
    if saved["meta"]["complete"]:
        assert [c["status"] for c in saved["cases"]] == ["ok", "error"]
    else:
        assert len(saved["cases"]) == 1
        assert "unmeasured" in outcome.out
    # the merged shards of such a run are incomplete too
    merged = tmp_path / "merged.json"
    assert call("merge", str(out), "-o", str(merged), cwd=tmp_path).code == 0
    assert call("compare", str(merged), cwd=tmp_path).code == ExitCode.FAILED


FIRST = "crashing_matmul/B1-M128-K128-N128/float32"


def test_a_shard_job_killed_mid_run_fails_keeps_its_cases_and_its_rerun_resumes(tmp_path):
    """The shard role for real (``ci-bench ci --role shard`` in a subprocess, as the reusable
    workflow runs it): terminated after its first case it exits non-zero and keeps that case
    in the runner's state folder; the job's re-run measures only the rest and exits 0."""
    write_project(tmp_path, ["crashing_matmul"], "shards = 1\n")
    event = tmp_path / "event.json"
    event.write_text((FIXTURES / "events" / "workflow_dispatch.json").read_text())
    state = tmp_path / "state"
    env = {
        "GITHUB_EVENT_NAME": "workflow_dispatch",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": "octo-org/kernels",
        "GITHUB_RUN_ID": "77",
        "CI_BENCH_SHARD": "1",
        "CI_BENCH_STATE": str(state),
    }
    args = ("ci", "--role", "shard", "--mode", "baseline", "--repeats", "2", "--warmup", "0")
    args += ("--out-dir", str(tmp_path / "out"))
    proc = cli_process(*args, cwd=tmp_path, extra_env={**env, "CRASH_MODE": "sleep"})
    kept = state / "octo-org_kernels-77-1of1" / "results.json"
    deadline = time.monotonic() + 240
    while not kept.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert kept.exists(), "the first case was never saved: " + (proc.poll() and proc.stderr.read())
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.TERMINATED, err
    assert "Traceback" not in err
    assert not (tmp_path / "out" / "results-1.json").exists()  # no shard file for the report
    saved = json.loads(kept.read_text())
    assert [c["id"] for c in saved["cases"]] == [FIRST]
    assert saved["meta"]["complete"] is False

    rerun = cli_process(*args, cwd=tmp_path, extra_env=env)
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    done = json.loads((tmp_path / "out" / "results-1.json").read_text())
    assert done["meta"]["complete"] is True
    assert sorted(c["id"] for c in done["cases"]) == [FIRST, FIRST.replace("M128", "M256")]
    first = next(c for c in done["cases"] if c["id"] == FIRST)
    assert first == saved["cases"][0]  # resumed, not re-measured
    assert not kept.parent.exists()  # state is kept only while the shard is unfinished


# --- SIGTERM -------------------------------------------------------------------------------


def test_sigterm_is_handled_like_sigint(tmp_path):
    write_project(tmp_path, ["crashing_matmul"])
    out = tmp_path / "r.json"
    proc = cli_process(
        "run",
        "-q",
        "--repeats",
        "2",
        "--warmup",
        "0",
        "-o",
        str(out),
        cwd=tmp_path,
        extra_env={"CRASH_MODE": "sleep"},
    )
    deadline = time.monotonic() + 240
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert out.exists(), "the first case was never saved"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "terminated" in err
    assert f"results measured so far were saved to {out}" in err
    assert "Traceback" not in err
    saved = json.loads(out.read_text())
    assert len(saved["cases"]) == 1
    assert saved["meta"]["complete"] is False


def test_a_tune_stopped_part_way_keeps_the_configs_it_already_measured(tmp_path):
    """A chip job's time limit stopped `tune --measure --write` after 10 of 14 cases and
    nothing was written: --write now keeps each case as it is done."""
    write_project(tmp_path, ["crashing_matmul"])
    tuned = tmp_path / "baselines" / f"crashing_matmul_v{MATMUL_VERSION}.tuned.v5e.json"
    proc = cli_process(
        "tune", "--chip", "v5e", "--measure", "1", "--measure-on-cpu", "--repeats", "2",
        "--warmup", "0", "--write", "-q", cwd=tmp_path, extra_env={"CRASH_MODE": "sleep"},
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while not tuned.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert tuned.exists(), "the first case's tuned config was never written"
    proc.send_signal(signal.SIGTERM)  # the second case sleeps
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.TERMINATED, err
    assert "Traceback" not in err
    cases = json.loads(tuned.read_text())["cases"]
    assert list(cases) == [FIRST]
    assert cases[FIRST]["measured"]["median_ms"] > 0  # timed, not only modelled


def test_an_interrupted_run_without_a_file_does_not_say_its_results_were_saved(tmp_path):
    """Issue 54 D10: "results measured so far were saved" with no file anywhere."""
    write_project(tmp_path, ["crashing_matmul"])
    proc = cli_process(
        "run", "--repeats", "2", "--warmup", "0", cwd=tmp_path, extra_env={"CRASH_MODE": "sleep"}
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # the first case is done; the second sleeps
        if line.startswith("[1/2]"):
            break
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.TERMINATED, err
    assert "terminated (SIGTERM)" in err
    assert "saved" not in err


def _marked(mark: str) -> list[int]:
    """Live processes whose environment carries ``TEST_MARK=mark``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if f"TEST_MARK={mark}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_sigterm_mid_case_lets_the_worker_exit_cleanly_and_waits_for_it(tmp_path):
    """Issue 50: a cancelled job's worker was SIGKILLed at once, and the next run on a TPU
    host found the chip busy. Now it gets SIGTERM and a grace period: its Python shutdown
    runs (the accelerator runtime's teardown with it) and the command returns only when
    no worker is left."""
    write_project(tmp_path, ["crashing_matmul"])
    out, exits, mark = tmp_path / "r.json", tmp_path / "exits", uuid.uuid4().hex
    proc = cli_process(
        "run", "-q", "--repeats", "2", "--warmup", "0", "-o", str(out), cwd=tmp_path,
        extra_env={"CRASH_MODE": "sleep", "EXIT_MARK_FILE": str(exits), "TEST_MARK": mark},
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert out.exists(), "the first case was never saved"
    time.sleep(1)  # the second case (the sleeping one) is in flight
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.TERMINATED, err
    assert _marked(mark) == [], "a worker outlived the cancelled run"
    assert exits.exists(), "the busy worker was killed, not stopped: its shutdown never ran"
    assert len(exits.read_text().split()) >= 1


def test_a_worker_does_not_outlive_a_parent_killed_outright(tmp_path):
    """A runner that kills ci-bench with SIGKILL (no handler runs) leaves no worker
    holding the chip: the kernel stops it with its parent."""
    write_project(tmp_path, ["crashing_matmul"])
    out, mark = tmp_path / "r.json", uuid.uuid4().hex
    proc = cli_process(
        "run", "-q", "--repeats", "2", "--warmup", "0", "-o", str(out), cwd=tmp_path,
        extra_env={"CRASH_MODE": "sleep", "TEST_MARK": mark},
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert out.exists(), "the first case was never saved"
    workers = [p for p in _marked(mark) if p != proc.pid]
    assert workers, "no worker was running"
    proc.kill()
    proc.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _marked(mark) == []


# --- internal errors ------------------------------------------------------------------------


def test_an_internal_error_has_its_own_exit_code_and_a_log(tmp_path, monkeypatch):
    from ci_bench.commands import cli

    def broken(*_args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setitem(cli.COMMANDS, "schema", broken)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    outcome = call("schema", cwd=tmp_path)
    assert outcome.code == ExitCode.INTERNAL == 5
    assert len(outcome.lines) == 1
    assert "Traceback" not in outcome.err
    log = Path(outcome.err.rsplit(" ", 1)[1].strip().rstrip(")"))
    assert log.is_file()
    assert "ZeroDivisionError: a bug" in log.read_text()


def test_a_truncated_bytecode_cache_says_how_to_recover_not_a_bug(tmp_path, monkeypatch):
    """Issue 54: a full disk left truncated .pyc files and every later run exited 5,
    'EOFError: marshal data too short'."""
    from ci_bench.commands import cli

    def truncated(*_args):
        raise EOFError("marshal data too short")

    monkeypatch.setitem(cli.COMMANDS, "schema", truncated)
    outcome = call("schema", cwd=tmp_path)
    assert outcome.code == ExitCode.USAGE
    assert len(outcome.lines) == 1
    assert "a truncated bytecode cache" in outcome.err
    assert "remove the __pycache__ folders under" in outcome.err
    assert "internal error" not in outcome.err


# --- untrusted text in markdown and annotations --------------------------------------------

PAYLOADS = [
    "a|b",
    "<img src=x onerror=alert(1)>",
    "</details><h1>hi</h1>",
    "x\n### injected heading",
    "`code` ``",
    "@octocat please merge",
    "[link](https://evil.example)",
    "::set-output name=x::y",
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_untrusted_text_is_inert_in_the_pr_comment(payload):
    bad = case(ID, status="error").model_copy(update={"error": payload})
    res = results([case(ID)]).model_copy(update={"cases": [bad]})
    lookup = {"matmul": Lookup("matmul", "0.1.0", None, None, f"note {payload}")}
    report = compare(res, lookup, Thresholds(), FailPolicy())
    report = report.model_copy(
        update={"cases": [c.model_copy(update={"id": f"matmul/{payload}"}) for c in report.cases]}
    )
    body = markdown_report(report)
    # a code span shows its text literally: what is inside one is inert
    outside = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", body)
    for dangerous in ("<img", "</details><h1>", "\n### injected", "@octocat"):
        if dangerous in payload:
            assert dangerous not in outside, body
    # ci-bench's own method link is the one link a comment writes; none from the payload survives
    own = re.escape(f"https://github.com/ci-bench/ci-bench/blob/v{ci_bench.__version__}/")
    assert not re.search(r"(?<!\\)\]\((?!" + own + ")", outside), body
    assert "\n### injected" not in body
    # every row of every table still has its header's number of cells
    tables: list[list[str]] = [[]]
    for line in body.splitlines():
        if line.startswith("|"):
            tables[-1].append(line)
        elif tables[-1]:
            tables.append([])
    tables = [t for t in tables if t]
    assert tables
    for table in tables:
        cells = {len(md_split(line)) for line in table}
        assert len(cells) == 1, table
    for line in annotations(report):
        assert "\n" not in line
        assert "\r" not in line
        assert line.count("::") == 2, line


def md_split(row: str) -> list[str]:
    """Cells of a GitHub table row: an escaped ``\\|`` is not a separator."""
    return row.replace("\\|", "").strip("|").split("|")


def test_md_inline_neutralises_every_payload():
    for payload in PAYLOADS:
        text = md_inline(payload)
        assert "\n" not in text
        assert "<" not in text
        assert "|" not in text.replace("\\|", "")
        assert "@octocat" not in text
