"""The one reader and the one writer (ci_bench/store/files.py): limits, refusals, faults."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from ci_bench.errors import InputError
from ci_bench.store import files, writer
from ci_bench.store.files import (
    Checkpoint,
    WriteError,
    append_text,
    json_lines,
    parse_json,
    read_text,
    write_text,
)


def no_space(after: int = 0):
    """A ``_write_all`` that fails as a full disk does, after ``after`` bytes."""
    real = writer._write_all

    def write_all(fd: int, data: bytes) -> None:
        if after:
            real(fd, data[:after])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    return write_all


# --- reading ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"\xff\xfe{}", "not UTF-8 text (byte 0)"),
        (b'{"a": NaN}', "a: not a finite number"),
        (b'{"a": [1, 1e999]}', "a.1: not a finite number"),
        (b'{"a": "\\ud800x"}', "a: not valid Unicode text"),
        (b'{"\\udfff": 1}', "a key is not valid Unicode text"),
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 64 levels"),
        (b'{"a":' * 70 + b"1" + b"}" * 70, "nested deeper than 64 levels"),
        (b"  \n", "file is empty"),
    ],
)
def test_the_reader_refuses_what_no_ci_bench_file_holds(data, needle):
    with pytest.raises(InputError, match=None) as caught:
        parse_json(data, "f.json", "results")
    assert needle in str(caught.value)
    assert str(caught.value).startswith("f.json")


def test_a_surrogate_pair_is_valid_unicode():
    assert parse_json(b'{"a": "\\ud83d\\ude00"}', "f", "x") == {"a": "\U0001f600"}


def test_json_lines_name_the_line_that_breaks_a_rule():
    text = '{"a": 1}\n\n{"a": NaN}\n'
    with pytest.raises(InputError, match=r"^h\.jsonl:3: a: not a finite number"):
        json_lines(text, "h.jsonl", "history record")
    assert json_lines('{"a": 1}\n', "h.jsonl", "x") == [("h.jsonl:1", {"a": 1})]


def test_reading_a_name_too_long_or_a_pipe_is_one_line(tmp_path):
    with pytest.raises(InputError, match="file name too long"):
        read_text(tmp_path / ("x" * 300), "results")
    os.mkfifo(tmp_path / "pipe")  # reading it would block forever
    with pytest.raises(InputError, match="not a regular file"):
        read_text(tmp_path / "pipe", "results")


# --- writing ---------------------------------------------------------------------------------


def test_a_new_file_is_written_whole_with_the_umask_mode(tmp_path):
    path = tmp_path / "sub" / "r.json"
    write_text(path, "one\n", what="results")
    assert path.read_text() == "one\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_umask()
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]  # no temporary left


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_an_existing_file_is_replaced_only_when_asked_and_keeps_its_mode(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("mine\n")
    path.chmod(0o640)
    with pytest.raises(WriteError, match=r"already exists.*--force"):
        write_text(path, "theirs\n", what="results")
    assert path.read_text() == "mine\n"
    write_text(path, "theirs\n", what="results", replace=True)
    assert path.read_text() == "theirs\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


@pytest.mark.parametrize("kind", ["symlink", "dangling", "fifo", "dir"])
def test_links_pipes_and_folders_are_never_replaced(tmp_path, kind):
    path = tmp_path / "out.json"
    target = tmp_path / "target.txt"
    target.write_text("keep\n")
    if kind == "symlink":
        path.symlink_to(target)
    elif kind == "dangling":
        path.symlink_to(tmp_path / "nowhere")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    with pytest.raises(WriteError) as caught:
        write_text(path, "x", what="export", replace=True)
    message = str(caught.value)
    assert message.startswith(f"{path}: cannot write the export: ")
    assert "nothing was written" in message
    assert path.is_symlink() if kind in ("symlink", "dangling") else path.exists()
    assert target.read_text() == "keep\n"


def test_a_device_node_is_never_replaced(tmp_path):
    path = tmp_path / "null"
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs root (CAP_MKNOD) here")
    with pytest.raises(WriteError, match="device, pipe or socket"):
        write_text(path, "x", what="report", replace=True)
    assert stat.S_ISCHR(path.lstat().st_mode)


def test_a_full_disk_keeps_the_previous_file_and_says_so(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    write_text(path, "first\n", what="results")
    monkeypatch.setattr(writer, "_write_all", no_space(after=3))
    with pytest.raises(WriteError) as caught:
        write_text(path, "second\n", what="results", replace=True)
    assert str(caught.value) == (
        f"{path}: cannot write the results: no space left on the device; "
        f"{path} keeps its previous content"
    )
    assert path.read_text() == "first\n"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_name_over_255_bytes_is_one_line(tmp_path):
    with pytest.raises(WriteError, match="file name too long"):
        write_text(tmp_path / ("é" * 130), "x", what="export")  # 260 bytes
    # The temporary name stays short: a 250-byte name still works.
    write_text(tmp_path / ("y" * 250), "x", what="export")


def test_a_checkpoint_says_what_its_last_save_held(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    checkpoint = Checkpoint(path, "results")
    checkpoint.write("one case\n", holds="1 measured case")
    checkpoint.write("two cases\n", holds="2 measured cases")  # its own file: replaced
    monkeypatch.setattr(writer, "_write_all", no_space())
    with pytest.raises(WriteError) as caught:
        checkpoint.write("three cases\n", holds="3 measured cases")
    assert str(caught.value).endswith(f"{path} still holds the previous save (2 measured cases)")
    assert path.read_text() == "two cases\n"


def test_a_checkpoint_never_starts_by_replacing_a_file(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("earlier results\n")
    with pytest.raises(WriteError, match="already exists"):
        Checkpoint(path, "results").write("x", holds="0 cases")
    Checkpoint(path, "results", replace=True).write("x", holds="0 cases")  # --force, --resume


# --- appending (GITHUB_OUTPUT, GITHUB_STEP_SUMMARY) ------------------------------------------


def test_appending_creates_adds_and_accepts_a_character_device(tmp_path):
    path = tmp_path / "summary.md"
    append_text(path, "a\n", what="job summary")
    append_text(path, "b\n", what="job summary")
    assert path.read_text() == "a\nb\n"
    append_text(Path(os.devnull), "discarded\n", what="job summary")


@pytest.mark.parametrize("kind", ["dir", "missing-folder", "fifo"])
def test_appending_where_it_cannot_is_one_line(tmp_path, kind):
    path = tmp_path / "summary"
    if kind == "dir":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)  # an append would block until a reader came
    else:
        path = tmp_path / "missing" / "summary.md"
    with pytest.raises(WriteError, match="nothing was written"):
        append_text(path, "x", what="job summary (GITHUB_STEP_SUMMARY)")


def test_a_failed_append_is_undone(tmp_path, monkeypatch):
    path = tmp_path / "outputs"
    path.write_text("verdict<<EOF\npass\nEOF\n")
    monkeypatch.setattr(writer, "_write_all", no_space(after=4))
    with pytest.raises(WriteError, match="nothing was appended; its earlier content is kept"):
        append_text(path, "regressions<<EOF\n0\nEOF\n", what="step outputs")
    assert path.read_text() == "verdict<<EOF\npass\nEOF\n"


def test_environment_errors_are_told_from_bugs():
    full = OSError(errno.ENOSPC, "No space left on device", "/x/cache")
    assert files.environment_error(full) == "/x/cache: no space left on the device"
    assert files.environment_error(OSError(errno.EBADF, "Bad file descriptor")) is None
    assert files.environment_error(ValueError("x")) is None
