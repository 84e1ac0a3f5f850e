"""Issue 31's reproductions: runner-command injection, six crashes, silent passes, init's TOML.

Each test failed on the code before the fix. They drive the CLI (in this process through
``tests.harness.inproc.call``, or a real process where the stream matters) on files shaped like the
independent fuzzer's findings.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from ci_bench.store.files import dump_model
from tests.conftest import FIXTURES, REPO, run_cli, write_project
from tests.harness.factories import case, results
from tests.harness.inproc import assert_one_line_error, call

ID = "matmul/B1-M128-K128-N128/float32"
ID4 = "matmul/B4-M128-K256-N128/float32"
# What a fork's measuring job can put in a results file's text fields.
PAYLOADS = [
    "x\n::add-mask::secret",
    "x\r::set-output name=verdict::pass",
    "x\u0085::error::forged",
    "x\u2028::warning::forged",
    "x\u2029  ::notice::forged",
    "::stop-commands::tok",
    "x ##[set-output name=verdict;]pass",
]


def command_lines(text: str) -> list[str]:
    """Lines a runner would read as a workflow command: ``::`` after leading whitespace (at
    any line break Python or the runner knows), or ``##[`` anywhere."""
    lines = text.splitlines()
    return [x for x in lines if x.lstrip().startswith("::") or "##[" in x]


@pytest.fixture
def files(tmp_path: Path) -> Path:
    write_project(tmp_path, ["kernels.matmul"])
    good = results([case(ID), case(ID4)])
    (tmp_path / "r.json").write_text(dump_model(good))
    done = call("promote", "r.json", "--baselines-dir", "baselines", cwd=tmp_path)
    assert done.code == 0, done.err
    return tmp_path


def edited(folder: Path, name: str, edit) -> Path:
    data = json.loads((folder / "r.json").read_text())
    edit(data)
    path = folder / name
    path.write_text(json.dumps(data))
    return path


# --- W1: no output line a runner reads as a command -------------------------------------


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("field", ["cpu_model", "device_kind", "jax", "profile"])
def test_compare_prints_no_workflow_command_from_a_results_file(files, field, payload):
    def edit(data):
        target = data["meta"] if field == "profile" else data["meta"]["device"]
        target[field] = payload

    edited(files, "evil.json", edit)
    done = run_cli("compare", "evil.json", "--baselines-dir", "baselines", cwd=files)
    assert done.returncode in (0, 1, 2), done.stderr
    assert command_lines(done.stdout + "\n" + done.stderr) == []
    shown = done.stdout + done.stderr
    assert re.findall(r"\w+", payload)[-1] in shown  # shown, inert, not dropped


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", "evil.json", "--baselines-dir", "baselines", "--format", "markdown"],
        ["compare", "evil.json", "--baselines-dir", "baselines", "--format", "json"],
        ["merge", "evil.json", "-o", "merged.json"],
        ["promote", "evil.json", "--baselines-dir", "other"],
        ["record", "evil.json", "--history", "h"],
        ["history", "--history", "h", "--no-baselines"],
        ["site", "--history", "h", "--no-baselines", "--out", "site"],
        ["plot", "evil.json", "--out", "p.png"],
        ["export", "evil.json", "--format", "bmf"],
    ],
)
def test_every_results_command_prints_no_workflow_command(files, argv):
    def edit(data):
        data["meta"]["device"]["cpu_model"] = PAYLOADS[0]
        data["meta"]["device"]["device_kind"] = PAYLOADS[2]
        data["meta"]["profile"] = PAYLOADS[3]
        data["meta"]["git"]["ref"] = PAYLOADS[1]

    edited(files, "evil.json", edit)
    if argv[0] in ("history", "site"):
        call("record", "evil.json", "--history", "h", cwd=files)
    done = run_cli(*argv, cwd=files)
    assert done.returncode != 5, done.stderr
    assert command_lines(done.stdout + "\n" + done.stderr) == []


def test_an_error_line_naming_a_hostile_value_is_no_command(files):
    """The one-line error quotes what it refuses: that quote is inert too."""
    edited(files, "evil.json", lambda d: d["meta"]["kernels"].update({"matmul": "\n::error::x"}))
    done = run_cli("compare", "evil.json", "--baselines-dir", "baselines", cwd=files)
    assert done.returncode == 2
    assert command_lines(done.stderr) == []


def test_annotations_stay_commands_and_their_text_stays_inert():
    from ci_bench.commands.output import InertStream
    from ci_bench.report.escape import inert_text, workflow_data

    assert (
        inert_text("  ::add-mask::x\nok ##[group]y\n")
        == "  :\u200b:add-mask::x\nok #\u200b#[group]y\n"
    )
    assert command_lines(workflow_data("a\u2028::error::b\r\n::x::")) == []
    import io

    raw = io.StringIO()
    stream = InertStream(raw)
    stream.write("ci-bench: ")
    stream.flush()
    stream.write(":")  # a line started in one write and continued in another
    stream.flush()
    stream.write(":error::x\n")
    stream.write_command("::error title=t::real\n")
    stream.write(" ")
    stream.flush()
    stream.write("::warning::split\n#")
    stream.flush()
    stream.write("#[group]\n")
    lines = raw.getvalue().splitlines()
    assert lines[1] == "::error title=t::real"
    assert command_lines("\n".join(lines[:1] + lines[2:])) == []


# --- the six crash causes --------------------------------------------------------------


@pytest.mark.parametrize("command", ["compare", "merge"])
def test_a_matrix_entry_that_is_no_case_id_is_one_line(files, command):
    edited(files, "m.json", lambda d: d["meta"].update(matrix=[ID, ID4, " "]))
    argv = ["--baselines-dir", "baselines"] if command == "compare" else ["-o", "out.json"]
    assert_one_line_error(call(command, "m.json", *argv, cwd=files), "meta.matrix", "entry 2")


def test_promote_role_under_a_pull_request_is_one_line(files):
    event = json.loads((FIXTURES / "events" / "pull_request_synchronize.json").read_text())
    (files / "event.json").write_text(json.dumps(event))
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(files / "event.json"),
        "GITHUB_REPOSITORY": "octo/kernels",
        "GITHUB_SHA": "a" * 40,
        "GITHUB_REF": "refs/pull/1/merge",
    }
    done = call("ci", "--role", "promote", "--out-dir", "out", cwd=files, env=env)
    assert_one_line_error(done, "promote", "release tag")


def test_a_deeply_nested_plan_is_one_line(files):
    env = {"CI_BENCH_PLAN": "[" * 100_000 + "]" * 100_000}
    done = call("ci", "--role", "report", "--out-dir", "out", cwd=files, env=env)
    assert_one_line_error(done, "CI_BENCH_PLAN", "nested deeper")


def test_init_on_a_symlink_loop_is_one_line(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert_one_line_error(call("init", "--dir", "a", cwd=tmp_path), "--dir a")


def test_a_time_of_1e308_reaches_the_comment(files):
    def edit(data):
        stats = data["cases"][0]["pallas"]
        stats.update(mean_ms=1e308, median_ms=1e308, max_ms=1e308, samples_ms=[1e308] * 20)

    edited(files, "huge.json", edit)
    done = call(
        "compare", "huge.json", "--baselines-dir", "baselines", "--format", "markdown", cwd=files
    )
    assert done.code == 1, done.err  # a regression, said in the comment, not a crash
    assert "regression" in done.out


@pytest.mark.parametrize("command", ["promote", "record"])
def test_a_tag_that_is_not_utf8_is_one_line(files, command):
    tag = os.fsdecode(b"v1.0\xff")
    argv = ["--baselines-dir", "b2"] if command == "promote" else ["--history", "h"]
    done = call(command, "r.json", *argv, "--tag", tag, cwd=files)
    assert_one_line_error(done, "--tag")
    assert not (files / "b2").exists()
    assert not (files / "h").exists()


def _sigterm_during(files, handler: str) -> tuple[int, str]:
    """A real process whose ``history`` command is ``handler`` (source defining ``slow``),
    sent SIGTERM half a second after it starts it: its exit code and stderr."""
    import signal
    import subprocess
    import sys
    import time

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(FIXTURES)])}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import time, sys\nfrom ci_bench.commands import cli\n{handler}"
            "cli.COMMANDS['history'] = slow\n"
            "print('ready', flush=True)\nsys.exit(cli.main(['history', '--history', 'h']))",
        ],
        cwd=files,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


def test_sigterm_of_a_command_that_measures_nothing_says_nothing_was_saved(files):
    code, err = _sigterm_during(files, "def slow(*a, **k):\n    time.sleep(60)\n")
    assert code == 143, err
    assert "terminated" in err
    assert "saved" not in err


def test_sigterm_that_a_library_wraps_in_its_own_error_still_exits_143(files):
    """pydantic-core, building a model's validator while a command's module is imported,
    turns the handler's exception into a SchemaError (seen in a clean-clone run: a
    cancelled ``history`` exited 5, "internal error"): a SIGTERM is a termination
    whatever exception it comes back as."""
    wraps = (
        "def slow(*a, **k):\n    try:\n        time.sleep(60)\n"
        "    except BaseException as exc:\n"
        "        raise RuntimeError(f'Error building validator: {exc!r}')\n"
    )
    code, err = _sigterm_during(files, wraps)
    assert code == 143, err
    assert "terminated (SIGTERM)" in err
    assert "internal error" not in err


# --- silent passes ---------------------------------------------------------------------


@pytest.mark.parametrize("how", ["null", "absent"])
@pytest.mark.parametrize("command", ["compare", "promote"])
def test_a_format_4_file_without_its_matrix_neither_passes_nor_is_promoted(files, how, command):
    def edit(data):
        data["cases"] = data["cases"][:1]
        if how == "null":
            data["meta"]["matrix"] = None
        else:
            del data["meta"]["matrix"]

    edited(files, "part.json", edit)
    where = "baselines" if command == "compare" else "fresh"
    done = call(command, "part.json", "--baselines-dir", where, cwd=files)
    assert_one_line_error(done, "meta.matrix")
    assert not (files / "fresh").exists()


# --- history at scale, the site, temp files --------------------------------------------


def test_change_points_are_searched_in_the_newest_window_with_whole_series_indices():
    from ci_bench.judge.changepoint import WINDOW, detect

    noise = [1.0 + 0.01 * ((i * 7) % 5 - 2) for i in range(20 * WINDOW)]
    late = len(noise) - WINDOW // 2
    found = detect([v * (1.3 if i >= late else 1.0) for i, v in enumerate(noise)])
    assert [c.index for c in found] == [late]
    early = [v * (1.3 if i >= WINDOW else 1.0) for i, v in enumerate(noise)]
    assert detect(early) == []  # older than the window: drawn, not searched (docs/SCALE.md)


def test_a_site_that_fails_midway_keeps_every_old_file(files, monkeypatch):
    from ci_bench.store import writer

    assert call("record", "r.json", "--history", "h", cwd=files).code == 0
    assert call("site", "--history", "h", "--no-baselines", "--out", "site", cwd=files).code == 0
    before = {p.name: p.read_bytes() for p in (files / "site").iterdir()}
    assert len(before) >= 2
    calls = []
    real = writer._write_all

    def full_on_the_second(fd, data):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(writer, "_write_all", full_on_the_second)
    done = call(
        "site", "--history", "h", "--no-baselines", "--out", "site", "--title", "New", cwd=files
    )
    assert_one_line_error(done, "site/data.js", "no space left", "nothing was written")
    assert {p.name: p.read_bytes() for p in (files / "site").iterdir()} == before


def test_a_killed_writers_temp_file_is_removed_by_the_next_write(files):
    import subprocess
    import sys

    assert call("record", "r.json", "--history", "h", cwd=files).code == 0
    (path,) = (files / "h").glob("*.jsonl")
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    left = files / "h" / f".{path.name[:32]}.{dead}-0123456789ab.tmp"
    left.write_text("half a record")
    other = json.loads((files / "r.json").read_text())
    other["meta"]["git"]["commit"] = "f" * 40
    (files / "r2.json").write_text(json.dumps(other))
    assert call("record", "r2.json", "--history", "h", cwd=files).code == 0
    assert not left.exists()


def test_promote_never_writes_a_baseline_the_reader_refuses(files, monkeypatch):
    """The reader's limit made small: a 62 MB results file gave a 114 MB baseline before."""
    from ci_bench.store import baseline_text  # the size check before a baseline is written

    monkeypatch.setattr(baseline_text, "MAX_FILE_BYTES", 2048)
    done = call("promote", "r.json", "--baselines-dir", "small", cwd=files)
    assert_one_line_error(done, "matmul_v0.1.0.json", "MiB every reader accepts")
    assert not list((files / "small").glob("*.json")) if (files / "small").exists() else True


def test_a_trace_that_cannot_be_written_is_one_line(files, monkeypatch):
    """Found by this branch's fuzz run: ``profile --out`` on a full disk; jax raises
    RESOURCE_EXHAUSTED when it writes the trace at ``stop_trace``."""
    import jax

    real = jax.profiler.stop_trace

    def full_disk() -> None:
        real()
        raise RuntimeError("RESOURCE_EXHAUSTED: out/trace/x.xplane.pb; No space left on device")

    monkeypatch.setattr(jax.profiler, "stop_trace", full_disk)
    done = call(
        "profile", "--kernel", "matmul", "--case", ID, "--out", "out", "--runs", "1", cwd=files
    )
    assert_one_line_error(done, "cannot write the trace", "No space left on device")


def test_ci_annotations_still_reach_the_runner_as_commands(files):
    """The output edge escapes everything but the annotations ci-bench means to give."""
    slow = results([case(ID, 2.0), case(ID4, 2.0)])
    data = json.loads(dump_model(slow))
    data["meta"]["git"]["ref"] = "refs/heads/x\n::add-mask::secret"
    (files / "slow.json").write_text(json.dumps(data))
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "workflow_dispatch",
        "GITHUB_EVENT_PATH": str(FIXTURES / "events" / "workflow_dispatch.json"),
        "GITHUB_REPOSITORY": "octo/kernels",
        "GITHUB_RUN_ID": "7",
        "GITHUB_SERVER_URL": "https://github.com",
    }
    argv = ["ci", "--results", "slow.json", "--out-dir", "o", "--mode", "baseline"]
    done = run_cli(*argv, "--baselines-ref", "", "--no-comment", cwd=files, env=env)
    assert done.returncode in (0, 1), done.stderr
    commands = command_lines(done.stdout + "\n" + done.stderr)
    assert commands, done.stdout
    assert all(re.match(r"::(error|warning|notice) title=ci-bench ", c) for c in commands)


@pytest.mark.parametrize("command", ["history", "export"])
def test_a_shard_index_past_its_count_is_refused_by_every_reader(files, command):
    """Found by this branch's fuzz run: ``meta.shard: 3/2`` passed ``history`` (exit 0)."""
    edited(files, "s.json", lambda d: d["meta"].update(shard="3/2"))
    argv = ["--results", "s.json", "--no-baselines"] if command == "history" else ["s.json"]
    argv += ["--format", "bmf"] if command == "export" else []
    assert_one_line_error(call(command, *argv, cwd=files), "meta.shard", "3/2")


def test_a_report_that_judges_a_case_twice_is_refused(files):
    """Found by this branch's fuzz run: ``record --report`` took a report holding one case
    twice (which verdict goes into the history?) and exited 0."""
    done = call("compare", "r.json", "--baselines-dir", "baselines", "-o", "rep.json", cwd=files)
    assert done.code == 0, done.err
    report = json.loads((files / "rep.json").read_text())
    report["cases"].append(report["cases"][0])
    (files / "rep.json").write_text(json.dumps(report))
    done = call("record", "r.json", "--history", "h", "--report", "rep.json", cwd=files)
    assert_one_line_error(done, "rep.json", "judged twice")
    assert not (files / "h").exists()


def test_a_history_record_holding_unicode_line_separators_reads_back(files):
    """Found by this branch's fuzz run: ``record`` wrote U+2028 raw inside a JSON string
    (valid JSON) and the reader split the line there, so the store no longer read."""
    edited(files, "u.json", lambda d: d["meta"]["device"].update(cpu_model="a\u2028b\x85c\x0cd"))
    assert call("record", "u.json", "--history", "h", cwd=files).code == 0
    done = call("history", "--history", "h", "--no-baselines", "--format", "json", cwd=files)
    assert done.code == 0, done.err


@pytest.mark.parametrize("complete", [True, False])
def test_a_case_of_the_matrix_lost_against_a_baseline_is_judged_once(files, complete):
    """Found by the 10,000-run fuzz: a case in the run's matrix and the baseline but not in
    the results was judged twice (missing from the selection, and never measured) and the
    report could not be built: ``compare`` crashed (exit 5). It is judged once, never
    measured, and fails."""

    def lose_one(data):
        data["cases"] = [c for c in data["cases"] if c["id"] != ID4]
        data["meta"]["complete"] = complete
        if not complete:
            data["meta"]["finished_at"] = None

    edited(files, "lost.json", lose_one)
    done = call("compare", "lost.json", "--format", "json", cwd=files)
    assert done.code == 1, done.err
    verdicts = [c for c in json.loads(done.out)["cases"] if c["id"] == ID4]
    assert [v["verdict"] for v in verdicts] == ["unmeasured"]
