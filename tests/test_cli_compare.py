"""``ci-bench compare``, ``promote`` and ``merge`` end to end, as subprocesses."""

from __future__ import annotations

import json

import pytest

from ci_bench.errors import ExitCode
from ci_bench.store.files import dump_model
from kernels.matmul import VERSION
from tests.conftest import run_cli
from tests.harness.factories import V5E, case, results

IDS = [
    "matmul/B1-M128-K128-N128/float32",
    "matmul/B1-M1024-K1024-N1024/bfloat16",
    "matmul/B4-M128-K256-N128/float32",
]


@pytest.fixture(scope="module")
def real_results(tmp_path_factory):
    """One real smoke run of matmul on this machine, shared by the tests below."""
    from tests.conftest import write_project

    folder = tmp_path_factory.mktemp("real")
    write_project(folder, ["kernels.matmul"])
    out = folder / "r.json"
    done = run_cli("run", "--kernel", "matmul", "--repeats", "5", "-q", "-o", str(out), cwd=folder)
    assert done.returncode == 0, done.stderr
    return out


def write_results(path, res):
    path.write_text(dump_model(res))
    return path


def test_a_baseline_made_from_the_same_results_passes(tmp_path, project, real_results):
    done = run_cli(
        "promote", str(real_results), "--baselines-dir", str(tmp_path / "b"), cwd=project
    )
    assert done.returncode == 0, done.stderr
    assert "created:" in done.stdout
    report_path = tmp_path / "report.json"
    done = run_cli(
        "compare",
        str(real_results),
        "--baselines-dir",
        str(tmp_path / "b"),
        "-o",
        str(report_path),
        cwd=project,
    )
    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    report = json.loads(report_path.read_text())
    assert report["verdict"] == "pass"
    assert {c["verdict"] for c in report["cases"]} == {"pass"}
    assert len(report["cases"]) == 12  # 6 forward, 6 backward (issue 21)


def test_promote_twice_refuses_and_leaves_the_file_byte_identical(tmp_path, project, real_results):
    folder = tmp_path / "b"
    assert (
        run_cli(
            "promote", str(real_results), "--baselines-dir", str(folder), cwd=project
        ).returncode
        == 0
    )
    path = folder / f"matmul_v{VERSION}.json"
    before = path.read_bytes()
    again = run_cli("promote", str(real_results), "--baselines-dir", str(folder), cwd=project)
    assert again.returncode == ExitCode.USAGE
    assert "use --force" in again.stderr
    assert path.read_bytes() == before
    forced = run_cli(
        "promote", str(real_results), "--baselines-dir", str(folder), "--force", cwd=project
    )
    assert forced.returncode == 0
    assert "replaced:" in forced.stdout


def test_promote_with_a_release_tag_keeps_unchanged_kernels_and_promotes_the_rest(
    tmp_path, project
):
    folder = tmp_path / "b"
    old = write_results(tmp_path / "old.json", results([case(i, 1.0) for i in IDS]))
    assert (
        run_cli(
            "promote", str(old), "--baselines-dir", str(folder), "--tag", "v0.1.0", cwd=project
        ).returncode
        == 0
    )
    path = folder / "matmul_v0.1.0.json"
    before = path.read_bytes()
    # The next release bumped gla, not matmul: the tag promotes gla, keeps matmul's numbers.
    both = results([case(i, 2.0) for i in IDS] + [case("gla/T64/float32", 1.0)])
    new = write_results(tmp_path / "new.json", both)
    done = run_cli(
        "promote", str(new), "--baselines-dir", str(folder), "--tag", "v0.2.0", cwd=project
    )
    assert done.returncode == 0, done.stderr
    assert f"unchanged: {path}" in done.stdout
    assert f"created: {folder / 'gla_v0.1.0.json'}" in done.stdout
    assert path.read_bytes() == before
    forced = run_cli(
        "promote",
        str(new),
        "--baselines-dir",
        str(folder),
        "--tag",
        "v0.2.0",
        "--force",
        cwd=project,
    )
    assert forced.returncode == 0
    assert f"replaced: {path}" in forced.stdout


def test_a_baseline_25_percent_faster_is_a_regression_shown_first(tmp_path, project):
    base = write_results(tmp_path / "base.json", results([case(i, 1.0) for i in IDS]))
    folder = tmp_path / "b"
    assert (
        run_cli("promote", str(base), "--baselines-dir", str(folder), cwd=project).returncode == 0
    )
    slower = [case(IDS[0], 1.25), case(IDS[1], 1.0), case(IDS[2], 1.25)]
    current = write_results(tmp_path / "cur.json", results(slower))
    done = run_cli(
        "compare", str(current), "--baselines-dir", str(folder), "--format", "markdown", cwd=project
    )
    assert done.returncode == ExitCode.FAILED
    rows = [line for line in done.stdout.splitlines() if line.startswith("| `matmul/")]
    assert "regression" in rows[0]
    assert "regression" in rows[1]
    assert {IDS[0], IDS[2]} == {rows[0].split()[1].strip("`"), rows[1].split()[1].strip("`")}
    assert done.stdout.startswith("### ❌ ci-bench: 2 regressions\n\n**2 regression · 1 pass")


def test_a_baseline_from_another_device_is_incomparable(tmp_path, project):
    base = write_results(tmp_path / "base.json", results([case(IDS[0], 0.01)], device=V5E))
    folder = tmp_path / "b"
    assert (
        run_cli("promote", str(base), "--baselines-dir", str(folder), cwd=project).returncode == 0
    )
    current = write_results(tmp_path / "cur.json", results([case(IDS[0], 5.0)]))
    done = run_cli(
        "compare", str(current), "--baselines-dir", str(folder), "--format", "json", cwd=project
    )
    assert done.returncode == ExitCode.OK
    assert json.loads(done.stdout)["cases"][0]["verdict"] == "incomparable"


def test_explicit_baseline_file_and_fail_on_flag(tmp_path, project):
    folder = tmp_path / "b"
    base = write_results(tmp_path / "base.json", results([case(IDS[0]), case(IDS[1])]))
    run_cli("promote", str(base), "--baselines-dir", str(folder), cwd=project)
    current = write_results(tmp_path / "cur.json", results([case(IDS[0])], profile="smoke"))
    explicit = ["--baseline", str(folder / "matmul_v0.1.0.json")]
    lenient = run_cli("compare", str(current), *explicit, "--fail-on", "none", cwd=project)
    assert lenient.returncode == ExitCode.OK
    assert "missing" in lenient.stdout
    strict = run_cli("compare", str(current), *explicit, "--fail-on", "missing", cwd=project)
    assert strict.returncode == ExitCode.FAILED
    bad = run_cli("compare", str(current), *explicit, "--fail-on", "sometimes", cwd=project)
    assert bad.returncode == ExitCode.USAGE


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{oops", "invalid JSON"),
        ("", "results file is empty"),
        ('{"schema_version": 99}', "schema_version: 99 is not supported"),
        ('{"schema_version": 1, "meta": {}, "cases": []}', "meta.tool_version"),
    ],
)
def test_bad_results_files_are_one_line_exit_2(tmp_path, project, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    for command in ("compare", "promote"):
        done = run_cli(command, str(path), cwd=project)
        assert done.returncode == ExitCode.USAGE
        assert message in done.stderr
        assert str(path) in done.stderr
        assert "Traceback" not in done.stderr


def test_nan_and_negative_timings_are_rejected(tmp_path, project):
    good = json.loads(dump_model(results([case(IDS[0])])))
    good["cases"][0]["native"]["std_ms"] = -0.5
    path = tmp_path / "neg.json"
    path.write_text(json.dumps(good))
    done = run_cli("compare", str(path), cwd=project)
    assert done.returncode == ExitCode.USAGE
    assert "cases.0.native.std_ms" in done.stderr


def test_a_baseline_of_another_kernel_is_rejected(tmp_path, project):
    folder = tmp_path / "b"
    gla = write_results(tmp_path / "gla.json", results([case("gla/B1-T256-H2-K64-V64/float32")]))
    run_cli("promote", str(gla), "--baselines-dir", str(folder), cwd=project)
    (folder / "gla_v0.1.0.json").rename(folder / "matmul_v0.1.0.json")
    current = write_results(tmp_path / "cur.json", results([case(IDS[0])]))
    done = run_cli("compare", str(current), "--baselines-dir", str(folder), cwd=project)
    assert done.returncode == ExitCode.USAGE
    assert "holds 'gla', expected 'matmul'" in done.stderr


def test_merge_joins_shards_into_the_whole_matrix(tmp_path, project):
    one = write_results(tmp_path / "1.json", results([case(IDS[0]), case(IDS[2])], shard="1/2"))
    two = write_results(tmp_path / "2.json", results([case(IDS[1])], shard="2/2"))
    out = tmp_path / "merged.json"
    done = run_cli("merge", str(one), str(two), "-o", str(out), cwd=project)
    assert done.returncode == 0, done.stderr
    merged = json.loads(out.read_text())
    assert [c["id"] for c in merged["cases"]] == [IDS[0], IDS[2], IDS[1]]
    assert merged["meta"]["shard"] is None
    # --force: the merged file exists now, and each of these must reach its own refusal.
    clash = run_cli("merge", str(one), str(one), "-o", str(out), "--force", cwd=project)
    assert clash.returncode == ExitCode.USAGE
    assert "is also in" in clash.stderr
    other = write_results(tmp_path / "3.json", results([case(IDS[1])], device=V5E, shard="2/2"))
    mixed = run_cli("merge", str(one), str(other), "-o", str(out), "--force", cwd=project)
    assert mixed.returncode == ExitCode.USAGE
    assert "meta.device" in mixed.stderr


def test_one_dirty_shard_makes_the_merged_run_dirty_and_another_commit_is_refused(
    tmp_path, project
):
    """A shard measured with uncommitted changes makes the whole run so (what promotion
    records); shards of one matrix measured at different commits are not one run."""

    def with_git(res, **git):
        meta = res.meta.model_copy(update={"git": res.meta.git.model_copy(update=git)})
        return res.model_copy(update={"meta": meta})

    clean = with_git(results([case(IDS[0])], shard="1/2"), commit="a" * 40, dirty=False)
    dirty = with_git(results([case(IDS[1])], shard="2/2"), commit="a" * 40, dirty=True)
    one = write_results(tmp_path / "1.json", clean)
    two = write_results(tmp_path / "2.json", dirty)
    out = tmp_path / "m.json"
    done = run_cli("merge", str(one), str(two), "-o", str(out), cwd=project)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["meta"]["git"]["dirty"] is True
    both_clean = write_results(tmp_path / "3.json", with_git(dirty, dirty=False))
    done = run_cli("merge", str(one), str(both_clean), "-o", str(out), "--force", cwd=project)
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["meta"]["git"]["dirty"] is False

    other = write_results(tmp_path / "4.json", with_git(dirty, commit="b" * 40))
    done = run_cli("merge", str(one), str(other), "-o", str(out), "--force", cwd=project)
    assert done.returncode == ExitCode.USAGE
    assert "meta.git.commit: " + "b" * 40 + " differs from " in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_shards_from_runners_with_different_cache_paths_merge(tmp_path, project):
    def with_cache(res, path):
        settings = res.meta.settings.model_copy(update={"compilation_cache": path})
        return res.model_copy(update={"meta": res.meta.model_copy(update={"settings": settings})})

    one = write_results(
        tmp_path / "1.json",
        with_cache(results([case(IDS[0])], shard="1/2"), "/home/r1/_work/.cache/jax"),
    )
    two = write_results(
        tmp_path / "2.json",
        with_cache(results([case(IDS[1])], shard="2/2"), "/home/r2/_work/.cache/jax"),
    )
    done = run_cli("merge", str(one), str(two), "-o", str(tmp_path / "m.json"), cwd=project)
    assert done.returncode == 0, done.stderr


def test_results_whose_cases_disagree_with_meta_kernels_are_rejected(tmp_path, project):
    data = json.loads(dump_model(results([case(IDS[0])])))
    data["meta"]["kernels"] = {}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    done = run_cli("compare", str(path), cwd=project)
    assert done.returncode == ExitCode.USAGE
    assert "meta.kernels says nothing" in done.stderr
    assert "Traceback" not in done.stderr


def test_part_of_a_matrix_is_not_promoted(tmp_path, project):
    part = write_results(tmp_path / "part.json", results([case(IDS[0])], shard="1/2"))
    done = run_cli("promote", str(part), "--baselines-dir", str(tmp_path / "b"), cwd=project)
    assert done.returncode == ExitCode.USAGE
    assert "merge the shards" in done.stderr
    assert not (tmp_path / "b").exists()
