"""Issue 18's reproductions, writers: every file ci-bench writes, and every way it can fail.

Names too long, outputs of the wrong kind, links and devices in the way, existing files
without ``--force``, unwritable GitHub step files, full disks (a seam in the one writer for
every writer, a real tmpfs through a real process where the machine allows it).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from ci_bench.store import writer
from ci_bench.store.files import dump_model
from tests.conftest import run_cli
from tests.harness.factories import case, results
from tests.harness.inproc import assert_one_line_error, call

ID = "matmul/B1-M128-K128-N128/float32"
ID4 = "matmul/B4-M128-K256-N128/float32"


@pytest.fixture
def results_file(tmp_path: Path) -> Path:
    path = tmp_path / "r.json"
    path.write_text(dump_model(results([case(ID), case(ID4)])))
    return path


LONG = "x" * 300


@pytest.mark.parametrize(
    "args",
    [
        ["merge", "{r}", "-o", f"{LONG}.json"],
        ["compare", "{r}", "-o", f"{LONG}.json"],
        ["export", "{r}", "--format", "bmf", "-o", f"{LONG}.json"],
        ["site", "--results", "{r}", "--out", LONG],
        ["record", "{r}", "--history", LONG],
        ["promote", "{r}", "--baselines-dir", LONG],
        ["plot", "{r}", "-o", f"{LONG}.png"],
    ],
)
def test_a_name_over_255_bytes_is_one_line_for_every_writer(tmp_path, results_file, args):
    argv = [a.replace("{r}", str(results_file)) for a in args]
    assert_one_line_error(call(*argv, cwd=tmp_path), "longer than 255 bytes")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["export", "{r}", "--format", "gab", "-o", "{dir}"],
            "--output {dir}: cannot write here: it is a directory",
        ),
        (
            ["site", "--results", "{r}", "--out", "{r}"],
            "--out {r}: cannot write here: not a directory",
        ),
        (
            ["record", "{r}", "--history", "{r}"],
            "--history {r}: cannot write here: not a directory",
        ),
    ],
)
def test_outputs_of_the_wrong_kind_are_checked_before_reading(tmp_path, results_file, args, needle):
    folder = tmp_path / "folder"
    folder.mkdir()
    fill = {"{r}": str(results_file), "{dir}": str(folder)}
    argv = [fill.get(a, a) for a in args]
    for key, value in fill.items():
        needle = needle.replace(key, value)
    assert_one_line_error(call(*argv, cwd=tmp_path), needle)


# --- crashes: GitHub step files, full disks ---------------------------------------------------


@pytest.mark.parametrize("summary", ["folder", "missing"])
def test_an_unwritable_step_summary_is_one_line_not_a_crash(project, results_file, summary):
    target = project / "summary-dir"
    if summary == "folder":
        target.mkdir()
    else:
        target = project / "no-such-folder" / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(target), "GITHUB_OUTPUT": str(project / "outputs.txt")}
    args = ["ci", "--results", str(results_file), "--mode", "baseline", "--out-dir", "o"]
    outcome = call(*args, cwd=project, env=env)
    assert_one_line_error(outcome, str(target), "GITHUB_STEP_SUMMARY")
    assert (project / "o" / "report.json").is_file()  # the report is never lost
    # nor the step outputs the workflow's next steps read (each part is tried on its own)
    assert (project / "outputs.txt").read_text().startswith("verdict<<ghadelimiter_")


WRITERS = [
    ["merge", "{r}", "-o", "{o}/merged.json"],
    ["compare", "{r}", "-o", "{o}/report.json"],
    ["export", "{r}", "--format", "bmf", "-o", "{o}/bmf.json"],
    ["promote", "{r}", "--baselines-dir", "{o}/store"],
    ["record", "{r}", "--history", "{o}/history"],
    ["site", "--results", "{r}", "--no-baselines", "--out", "{o}/site"],
]


@pytest.mark.parametrize("args", WRITERS, ids=lambda a: a[0])
def test_every_writer_on_a_full_disk_says_no_space_and_keeps_what_was_there(
    tmp_path, results_file, monkeypatch, args
):
    """Deterministic: the one writer's low-level write fails as ENOSPC would."""
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setattr(writer, "_write_all", _enospc)
    argv = [a.replace("{r}", str(results_file)).replace("{o}", str(out)) for a in args]
    outcome = call(*argv, cwd=tmp_path)
    assert_one_line_error(outcome, str(out), "no space left on the device", "nothing was written")
    leftovers = [p for p in out.rglob("*") if p.is_file()]
    assert leftovers == []  # no half file, no temporary


def _enospc(fd: int, data: bytes) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_run_on_a_full_disk_keeps_its_checkpoint(project, monkeypatch):
    """The second case's save fails: the file keeps the first, and the error says so."""
    real, saves = writer._write_all, []

    def second_fails(fd: int, data: bytes) -> None:
        saves.append(len(data))
        if len(saves) == 2:
            _enospc(fd, data)
        real(fd, data)

    monkeypatch.setattr(writer, "_write_all", second_fails)
    out = project / "r.json"
    args = [
        "run",
        "--kernel",
        "matmul",
        "--case",
        ID,
        "--case",
        "matmul/B1-M128-K128-N128/bfloat16",
    ]
    outcome = call(*args, "--repeats", "2", "--warmup", "0", "-q", "-o", str(out), cwd=project)
    held = "still holds the previous save (1 of 2 cases)"
    assert_one_line_error(outcome, str(out), "no space left on the device", held)
    kept = json.loads(out.read_text())
    assert len(kept["cases"]) == 1
    assert kept["meta"]["complete"] is False


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_real_full_disk_through_a_real_process(tmp_path, results_file):
    full = tmp_path / "full"
    full.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"mount -t tmpfs refused here: {mounted.stderr.decode().strip()}")
    try:
        with (full / "filler").open("wb", buffering=0) as handle:
            try:
                while True:
                    handle.write(b"\0" * 4096)
            except OSError:
                pass
        done = run_cli("merge", str(results_file), "-o", str(full / "m.json"), cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines() == [
            f"ci-bench: error: {full / 'm.json'}: cannot write the merged results: no space "
            "left on the device; nothing was written"
        ]
        assert sorted(p.name for p in full.iterdir()) == ["filler"]
    finally:
        subprocess.run(["umount", "-l", str(full)], check=False)


@pytest.mark.parametrize("target", ["device", "symlink"])
def test_an_output_onto_a_device_or_link_is_refused_and_left_alone(tmp_path, results_file, target):
    path = tmp_path / "out"
    if target == "device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null twin
        except PermissionError:
            pytest.skip("mknod needs root here")
    else:
        (tmp_path / "target.txt").write_text("keep\n")
        path.symlink_to(tmp_path / "target.txt")
    for args in (
        ["merge", str(results_file), "-o", str(path), "--force"],
        ["compare", str(results_file), "-o", str(path), "--force"],
        ["export", str(results_file), "--format", "bmf", "-o", str(path), "--force"],
        ["plot", str(results_file), "-o", str(path), "--force"],
    ):
        outcome = call(*args, cwd=tmp_path)
        assert_one_line_error(outcome, str(path), "regular files only")
    assert stat.S_ISCHR(path.lstat().st_mode) if target == "device" else path.is_symlink()


@pytest.mark.parametrize(
    "args",
    [
        ["merge", "{r}", "-o", "{x}"],
        ["compare", "{r}", "-o", "{x}"],
        ["compare", "{r}", "--markdown", "{x}"],
        ["export", "{r}", "--format", "bmf", "-o", "{x}"],
        ["plot", "{r}", "-o", "{x}"],
    ],
    ids=lambda a: "-".join(a[0::2][:2]),
)
def test_existing_outputs_are_replaced_only_with_force(tmp_path, results_file, args):
    existing = tmp_path / "existing.out"
    existing.write_bytes(b"earlier work\n")
    argv = [a.replace("{r}", str(results_file)).replace("{x}", str(existing)) for a in args]
    assert_one_line_error(call(*argv, cwd=tmp_path), str(existing), "already exists", "--force")
    assert existing.read_bytes() == b"earlier work\n"
    outcome = call(*argv, "--force", cwd=tmp_path)
    assert outcome.code in (0, 1), outcome.err
    assert existing.read_bytes() != b"earlier work\n"
