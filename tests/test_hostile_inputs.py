"""Issue 15's reproductions, inputs side: every bad input is one line and exit 2.

Each test is a finding from the hostile-input survey: flags, config, files, event payloads
and output paths. They run the CLI in this process (fast) unless a subprocess matters.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_bench.errors import InputError
from ci_bench.github.context import load_context, parse_event
from ci_bench.store.files import dump_model
from tests.harness.factories import case, results
from tests.harness.inproc import assert_one_line_error, call

ID = "matmul/B1-M128-K128-N128/float32"


@pytest.fixture
def results_file(tmp_path: Path) -> Path:
    path = tmp_path / "r.json"
    path.write_text(dump_model(results([case(ID)])))
    return path


def edited(path: Path, edit) -> Path:
    """The results file with ``edit`` applied to its JSON (text in, text out)."""
    path.write_text(edit(path.read_text()))
    return path


# --- output paths: checked before anything is read, measured or written ----------------


def test_merge_into_a_directory_is_one_line(tmp_path, results_file):
    folder = tmp_path / "out"
    folder.mkdir()
    outcome = call("merge", str(results_file), "-o", str(folder), cwd=tmp_path)
    assert_one_line_error(outcome, "--output", str(folder), "is a directory")


@pytest.mark.parametrize("flag", ["-o", "--markdown"])
def test_compare_outputs_under_a_file_are_one_line(tmp_path, results_file, flag):
    target = results_file / "report.out"
    outcome = call("compare", str(results_file), flag, str(target), cwd=tmp_path)
    assert_one_line_error(outcome, str(target), "not a directory")


def test_plot_into_an_unwritable_place_is_one_line(tmp_path, results_file):
    target = results_file / "roofline.png"
    outcome = call("plot", str(results_file), "-o", str(target), cwd=tmp_path)
    assert_one_line_error(outcome, "--out", "not a directory")


def test_promote_into_a_file_is_one_line(tmp_path, results_file):
    outcome = call("promote", str(results_file), "--baselines-dir", str(results_file), cwd=tmp_path)
    assert_one_line_error(outcome, "--baselines-dir", "not a directory")


def test_run_output_under_a_file_fails_before_measuring(project):
    blocker = project / "file"
    blocker.write_text("x")
    outcome = call(
        "run", "--kernel", "matmul", "-q", "--output", str(blocker / "r.json"), cwd=project
    )
    assert_one_line_error(outcome, "--output", "not a directory")
    assert "[1/" not in outcome.err  # nothing was measured


def test_an_uncreatable_compilation_cache_fails_before_measuring(project):
    blocker = project / "file"
    blocker.write_text("x")
    outcome = call(
        "run", "--kernel", "matmul", "-q", "--compilation-cache", str(blocker / "c"), cwd=project
    )
    assert_one_line_error(outcome, "--compilation-cache", "not a directory")


def test_rerunning_run_never_silently_replaces_earlier_results(project):
    out = project / "r.json"
    out.write_text("earlier results\n")
    outcome = call("run", "--kernel", "matmul", "-q", "--output", str(out), cwd=project)
    assert_one_line_error(outcome, "--output", "already exists", "--force")
    assert out.read_text() == "earlier results\n"


# --- files: size, encoding, nesting, finite numbers, names ------------------------------


def test_deeply_nested_results_json_is_one_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    outcome = call("compare", str(path), cwd=tmp_path)
    assert_one_line_error(outcome, str(path), "nested")


@pytest.mark.parametrize("number", ["1e999", "-1e400", "Infinity", "NaN"])
def test_a_non_finite_number_in_a_results_file_is_invalid(tmp_path, results_file, number):
    edited(results_file, lambda t: t.replace('"tflops": ', f'"tflops": {number}, "x": ', 1))
    for command in ("compare", "plot"):
        outcome = call(command, str(results_file), cwd=tmp_path)
        assert_one_line_error(outcome, str(results_file), "finite")


def test_a_huge_results_file_is_refused_by_size(tmp_path, monkeypatch):
    from ci_bench.store import files

    monkeypatch.setattr(files, "MAX_FILE_BYTES", 1000)
    path = tmp_path / "big.json"
    path.write_text('{"x": "' + "a" * 2000 + '"}')
    outcome = call("compare", str(path), cwd=tmp_path)
    assert_one_line_error(outcome, str(path), "larger than")


def test_a_non_semver_version_in_a_results_file_is_one_line(tmp_path, results_file):
    edited(results_file, lambda t: t.replace('"0.1.0"', '"banana"'))
    outcome = call("compare", str(results_file), cwd=tmp_path)
    assert_one_line_error(outcome, str(results_file), "version")


@pytest.mark.parametrize("name", ["k" * 300, "mat\u0000mul", "../../escaped", "/abs/olute"])
def test_unsafe_kernel_names_in_a_results_file_are_one_line(tmp_path, results_file, name):
    edited(results_file, lambda t: t.replace('"matmul"', json.dumps(name)))
    folder = tmp_path / "b"
    folder.mkdir()
    for command in ("compare", "promote"):
        outcome = call(command, str(results_file), "--baselines-dir", str(folder), cwd=tmp_path)
        assert_one_line_error(outcome, str(results_file), "kernel")
    assert list(folder.iterdir()) == []
    assert not (tmp_path.parent / "escaped_v0.1.0.json").exists()


# --- config --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (b"tool = 1\n", "tool"),
        (b"[tool]\nci-bench = 1\n", "tool.ci-bench"),
        (b'[tool.ci-bench]\nkernels = ["caf\xe9"]\n', "UTF-8"),
        (b"[tool.ci-bench]\nrepeats = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested"),
        (b"[tool.ci-bench]\nrepeats = 1e999\n", "repeats"),
        (b'[tool.ci-bench]\nkernels = "kernels.matmul"\n', "kernels"),
        (b"[tool.ci-bench]\nwarmup = -1\n", "warmup"),
        (b"[tool.ci-bench]\nrepeats = 100000000000\n", "repeats"),
        (b"[tool.ci-bench]\nseed = -1\n", "seed"),
    ],
)
def test_a_malformed_config_is_one_line_naming_the_key(tmp_path, text, needle):
    (tmp_path / "pyproject.toml").write_bytes(text)
    outcome = call("list", cwd=tmp_path)
    assert_one_line_error(outcome, "pyproject.toml", needle)


def test_invalid_toml_is_never_skipped_for_defaults(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.ci-bench\nkernels = [\n")
    sub = tmp_path / "pkg"
    sub.mkdir()
    outcome = call("list", cwd=sub)
    assert_one_line_error(outcome, "pyproject.toml", "invalid TOML")


# --- flags ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--seed", str(2**64)], "--seed"),
        (["--seed", "-1"], "--seed"),
        (["--kernel", "matmul", "--shape", f"{2**64},1,1"], "--shape"),
        (["--kernel", "matmul", "--shape", ""], "--shape"),
        (["--kernel", "matmul", "--shape", "0,1,1"], "--shape"),
        (["--max-time", "nan"], "--max-time"),
        (["--max-time", "inf"], "--max-time"),
        (["--peak-tflops", "inf"], "--peak-tflops"),
        (["--peak-gbps", "-3"], "--peak-gbps"),
        (["--repeats", "0"], "--repeats"),
        (["--repeats", str(10**12)], "--repeats"),
        (["--warmup", "-1"], "--warmup"),
        (["--adaptive", "nan"], "--adaptive"),
    ],
)
def test_flags_out_of_range_are_one_line(project, args, needle):
    outcome = call("run", "-q", *args, cwd=project)
    assert_one_line_error(outcome, needle)


def test_plot_peaks_must_be_finite_and_positive(tmp_path, results_file):
    for value in ("0", "nan", "-1", "inf"):
        outcome = call("plot", str(results_file), "--peak-gbps", value, cwd=tmp_path)
        assert_one_line_error(outcome, "--peak-gbps")


# --- GitHub event payloads -------------------------------------------------------------------


def context_for(tmp_path: Path, name: str, body: bytes):
    path = tmp_path / "event.json"
    path.write_bytes(body)
    return load_context({"GITHUB_EVENT_NAME": name, "GITHUB_EVENT_PATH": str(path)})


PR = {
    "action": "opened",
    "pull_request": {
        "number": 2,
        "head": {"sha": "a" * 40, "repo": {"full_name": "o/r"}},
        "base": {"sha": "b" * 40, "ref": "main", "repo": {"full_name": "o/r"}},
    },
}


def with_number(number):
    pr = json.loads(json.dumps(PR))
    pr["pull_request"]["number"] = number
    return pr


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("pull_request", b"null"),
        ("pull_request", b"[]"),
        ("pull_request", b'"x"'),
        ("push", b'{"ref": 123}'),
        ("workflow_dispatch", b'{"inputs": []}'),
        ("workflow_dispatch", b'{"inputs": {"repeats": 1e30}}'),
        ("workflow_dispatch", b'{"inputs": {"repeats": "1e30"}}'),
        ("workflow_dispatch", b'{"inputs": {"repeats": Infinity}}'),
        ("workflow_dispatch", b'{"inputs": {"repeats": 1e400}}'),
        ("workflow_dispatch", b'{"inputs": {"repeats": "0"}}'),
        ("workflow_dispatch", b'{"inputs": {"kernels": 5}}'),
        ("workflow_dispatch", b'{"inputs": {"base": "--upload-pack=evil"}}'),
        (
            "pull_request",
            json.dumps({**PR, "pull_request": {**PR["pull_request"], "head": "x"}}).encode(),
        ),
        ("pull_request", json.dumps(with_number(-5)).encode()),
        ("pull_request", json.dumps(with_number(1.5)).encode()),
        ("pull_request", json.dumps(with_number(True)).encode()),
        ("pull_request", json.dumps(with_number("7")).encode()),
        ("pull_request", b"\xff\xfe{}"),
        ("pull_request", b"[" * 100_000 + b"]" * 100_000),
        ("release", b'{"release": {"tag_name": ["v1.0.0"]}}'),
        ("workflow_run", b'{"workflow_run": {"id": -1, "head_sha": "a", "pull_requests": [{}]}}'),
    ],
)
def test_a_hostile_event_payload_is_an_input_error(tmp_path, name, body):
    with pytest.raises(InputError) as err:
        context_for(tmp_path, name, body)
    assert "\n" not in str(err.value)
    assert "event" in str(err.value)


def test_a_hostile_event_through_the_cli_is_one_line(project):
    event = project / "event.json"
    event.write_bytes(b'{"inputs": {"repeats": 1e400}}')
    env = {"GITHUB_EVENT_NAME": "workflow_dispatch", "GITHUB_EVENT_PATH": str(event)}
    outcome = call("ci", "--out-dir", str(project / "o"), "-q", cwd=project, env=env)
    assert_one_line_error(outcome, "repeats")


def test_valid_events_still_parse():
    event = parse_event("pull_request", PR, None)
    assert event.number == 2
    dispatch = parse_event("workflow_dispatch", {"inputs": {"repeats": "7"}}, None)
    assert dispatch.repeats == 7
