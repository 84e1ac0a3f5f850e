"""``ci-bench remodel``: a baseline promoted under an older cost-model revision is modelled
again from the measured commit's kernel code, its measurements untouched, so the model
judges pull requests against it again; in a real git repository, through the CLI."""

from __future__ import annotations

import json
import subprocess

import pytest

from ci_bench.errors import ExitCode
from ci_bench.schema.model import MODEL_REVISION
from tests.conftest import REPO, run_cli, write_project

MM = """
import dataclasses, functools
from ci_bench.spec import MatrixProfile
from kernels.matmul import SPEC as MATMUL, BlockSizes, matmul_tiled
ONE = MatrixProfile(({{"B": 1, "M": 256, "K": 256, "N": 256}},), ("bfloat16", "float32"))
SPEC = dataclasses.replace(
    MATMUL, name="mm", version="{version}", matrix={{"smoke": ONE}}, modes=("forward",),
    pallas=functools.partial(matmul_tiled, block_sizes=BlockSizes({blocks})),
)
"""
BASELINE = "b/mm_v1.0.0.json"


def git(folder, *args):
    done = subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)
    return done.stdout.decode().strip()


def commit(folder, message, *, version="1.0.0", blocks="128, 128, 128"):
    (folder / "mm.py").write_text(MM.format(version=version, blocks=blocks))
    git(folder, "add", "mm.py", "pyproject.toml")  # the baselines stay the test's own
    git(folder, "commit", "-q", "-m", message)
    return git(folder, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def promoted(tmp_path_factory):
    """A project whose mm kernel v1.0.0 was measured and promoted at its first commit."""
    folder = tmp_path_factory.mktemp("remodel")
    write_project(folder, ["mm"])
    git(folder, "init", "-q", "-b", "main")
    git(folder, "config", "user.email", "t@example.com")
    git(folder, "config", "user.name", "t")
    measured = commit(folder, "mm 1.0.0")
    results = folder / "run.json"
    done = run_cli("run", "--repeats", "3", "--warmup", "1", "-q", "-o", str(results), cwd=folder)
    assert done.returncode == ExitCode.OK, done.stderr
    done = run_cli("promote", str(results), "--baselines-dir", "b", cwd=folder)
    assert done.returncode == ExitCode.OK, done.stderr
    return folder, measured, (folder / BASELINE).read_text()


def aged(text, factor=1.5):
    """The baseline as an older revision would have modelled it: revision 8 and every
    chip's time ``factor`` x (what the judge then calls "not judged")."""
    doc = json.loads(text)
    for case in doc["entries"][0]["cases"]:
        case["model"]["revision"] = MODEL_REVISION - 1
        for chip in case["model"]["chips"].values():
            if chip["modelled_us"] is not None:
                chip["modelled_us"] *= factor
    return json.dumps(doc, indent=2)


def fresh(folder, text):
    (folder / BASELINE).write_text(text)


def test_a_current_baseline_is_unchanged_and_check_passes(promoted):
    folder, measured, text = promoted
    fresh(folder, text)
    done = run_cli("remodel", BASELINE, "--check", "-q", cwd=folder)
    assert done.returncode == ExitCode.OK, done.stderr
    assert done.stdout.startswith(f"unchanged: {BASELINE} (cpu:"), done.stdout
    assert f"2 cases at {measured[:12]}, revision {MODEL_REVISION}" in done.stdout
    # Nothing to write, so nothing was: the file is byte-identical.
    run_cli("remodel", BASELINE, "-q", cwd=folder)
    assert (folder / BASELINE).read_text() == text


def test_an_older_revision_is_remodelled_from_the_measured_commit(promoted):
    folder, measured, text = promoted
    fresh(folder, aged(text))
    # The head moved on (smaller tiles, same version): the measured commit is modelled.
    head = commit(folder, "smaller tiles, same version", blocks="64, 128, 128")
    try:
        check = run_cli("remodel", BASELINE, "--check", "-q", cwd=folder)
        assert check.returncode == ExitCode.FAILED, check.stderr
        assert check.stdout.startswith("stale: "), check.stdout
        assert f"revision {MODEL_REVISION - 1} -> {MODEL_REVISION}" in check.stdout
        assert "-33.3%" in check.stdout  # 1.5x back to the model's figure
        assert (folder / BASELINE).read_text() == aged(text)  # --check wrote nothing

        done = run_cli("remodel", BASELINE, "-q", cwd=folder)
        assert done.returncode == ExitCode.OK, done.stderr
        assert done.stdout.startswith("remodelled: "), done.stdout
        new, old = json.loads((folder / BASELINE).read_text()), json.loads(text)
        assert new["schema_version"] == 7  # format 7: provenance.dirty
        (entry,), (was,) = new["entries"], old["entries"]
        # The models are exactly the ones the run wrote at the measured commit, not the
        # head's smaller tiles; every measurement is as it was.
        for now, before in zip(entry["cases"], was["cases"], strict=True):
            assert now["model"].pop("model_ms") >= 0  # how long it took: not a figure
            before["model"].pop("model_ms")
            assert now["model"] == before["model"]
            assert {k: v for k, v in now.items() if k != "model"} == {
                k: v for k, v in before.items() if k != "model"
            }
        remodelled = entry["provenance"].pop("remodelled")
        assert was["provenance"].pop("remodelled") is None  # promoted, never remodelled
        assert entry["provenance"] == was["provenance"]
        assert remodelled["commit"] == measured != head
        assert remodelled["revision"] == MODEL_REVISION
    finally:
        git(folder, "reset", "-q", "--hard", measured)


def test_at_a_commit_whose_kernel_has_another_version_is_refused(promoted):
    folder, measured, text = promoted
    fresh(folder, aged(text))
    bumped = commit(folder, "mm 1.1.0", version="1.1.0")
    try:
        done = run_cli("remodel", BASELINE, "--at", bumped, "-q", cwd=folder)
        assert done.returncode == ExitCode.USAGE
        assert done.stdout.startswith(f"left: {BASELINE} (cpu:"), done.stdout
        assert "kernel mm is version 1.1.0, the baseline 1.0.0" in done.stdout
        assert done.stderr.strip() == (
            "ci-bench: error: 1 baseline entry could not be modelled (above, 'left'); no other was"
        )
        assert (folder / BASELINE).read_text() == aged(text)
    finally:
        git(folder, "reset", "-q", "--hard", measured)


def test_a_commit_missing_from_the_clone_and_another_machine_are_one_line_errors(promoted):
    folder, _, text = promoted
    doc = json.loads(aged(text))
    doc["entries"][0]["provenance"]["commit"] = "0" * 40
    fresh(folder, json.dumps(doc))
    done = run_cli("remodel", BASELINE, "-q", cwd=folder)
    assert done.returncode == ExitCode.USAGE
    assert "is not a commit in this clone (check out with fetch-depth: 0)" in done.stdout
    assert len(done.stderr.strip().splitlines()) == 1

    doc["entries"][0]["device"] |= {"platform": "tpu", "device_kind": "TPU v5 lite"}
    fresh(folder, json.dumps(doc))
    done = run_cli("remodel", BASELINE, "-q", cwd=folder)
    assert done.returncode == ExitCode.USAGE
    assert done.stdout.startswith(
        f"left: {BASELINE} (tpu:TPU v5 lite): measured on tpu:TPU v5 lite, this machine is "
        "cpu: remodel it there"
    )
    assert "nothing to remodel here" in done.stderr


def test_compare_judges_the_model_again_once_the_baseline_is_remodelled(promoted):
    """The path a user takes after upgrading ci-bench: the run's models are this revision's,
    the baseline's another's, so the model is not judged; remodelled, it is."""
    folder, _, text = promoted
    fresh(folder, aged(text, factor=1.0))
    args = ("compare", "run.json", "--baselines-dir", "b", "--format", "json")

    def model_reasons():
        done = run_cli(*args, cwd=folder)
        assert done.returncode == ExitCode.OK, done.stderr
        return [case["model"]["reason"] for case in json.loads(done.stdout)["cases"]]

    before = model_reasons()
    assert all(r.startswith("not judged: the reference was modelled by") for r in before)
    assert all("remodel the baseline (ci-bench remodel)" in r for r in before)
    # The folder, as a user upgrading names it: the tuned config beside it is no baseline.
    (folder / "b" / "mm_v1.0.0.tuned.v5e.json").write_text("{}")
    done = run_cli("remodel", "b", "-q", cwd=folder)
    assert done.returncode == ExitCode.OK, done.stderr
    assert done.stdout.startswith(f"remodelled: {BASELINE} (cpu:"), done.stdout
    after = model_reasons()
    assert not any("not judged" in r for r in after), after


def test_a_cpu_models_the_shipped_gla_baseline_as_the_chip_did():
    """The project's GLA baseline was measured and modelled on a TPU v5e; its kernel reads
    no stored layout, so a CPU's model of its ci cases, as v5e and v4i, is the chip's to the
    last digit. A new model revision fails this until the baseline is remodelled (or
    promoted again): the shipped baselines stay judged."""
    from kernels.gla import VERSION

    done = run_cli(
        "analyze", "--kernel", "gla", "--profile", "ci", "--chip", "v5e", "--chip", "v4i",
        "--format", "json", "-q", cwd=REPO,
    )  # fmt: skip
    assert done.returncode == ExitCode.OK, done.stderr
    here = {c["id"]: c for c in json.loads(done.stdout)["cases"]}
    (entry,) = json.loads((REPO / "baselines" / f"gla_v{VERSION}.json").read_text())["entries"]
    assert entry["device"]["device_kind"] == "TPU v5 lite"
    assert len(entry["cases"]) == len(here) == 20
    for case in entry["cases"]:
        assert case["model"]["revision"] == MODEL_REVISION
        for chip in ("v5e", "v4i"):
            stored = case["model"]["chips"][chip]["modelled_us"]
            assert here[case["id"]]["chips"][chip]["modelled_us"] == stored, (case["id"], chip)


# --- the store's part, on the promoted file --------------------------------------------------


def entry_of(text):
    from ci_bench.schema import BaselineFile

    return BaselineFile.model_validate_json(text).entries[0]


def models_of(entry, **changes):
    return {c.id: c.model.model_copy(update=changes) for c in entry.cases}


def info():
    from datetime import UTC, datetime

    from ci_bench.schema.baseline import Remodelled

    when = datetime(2026, 12, 7, tzinfo=UTC)
    return Remodelled(
        commit="a" * 40, revision=MODEL_REVISION, remodelled_at=when, tool_version="x"
    )


def test_remodel_entry_ignores_the_time_to_trace_and_says_what_moved(promoted):
    from ci_bench.store.remodel import remodel_entry

    entry = entry_of(promoted[2])
    same = remodel_entry(entry, models_of(entry, model_ms=123.0), info())
    assert (same.action, same.entry, same.moved, same.largest) == ("unchanged", entry, 0, None)

    slower = {}
    for case in entry.cases:
        chips = {n: c.model_copy(update={"modelled_us": c.modelled_us * 1.1})
                 for n, c in case.model.chips.items()}  # fmt: skip
        slower[case.id] = case.model.model_copy(update={"chips": chips})
    slower[entry.cases[1].id] = entry.cases[1].model  # one case unmoved
    moved = remodel_entry(entry, slower, info())
    assert (moved.action, moved.moved, moved.revisions) == ("remodelled", 1, (MODEL_REVISION,))
    assert moved.largest.case == entry.cases[0].id
    assert moved.largest.change == pytest.approx(0.1)
    assert moved.entry.provenance.remodelled == info()
    assert [c.model for c in moved.entry.cases] == [slower[c.id] for c in entry.cases]


def test_what_would_be_lost_is_refused(promoted):
    from ci_bench.errors import InputError
    from ci_bench.schema.model import not_modelled
    from ci_bench.schema.withheld import WithheldModel
    from ci_bench.store.remodel import remodel_entry

    entry = entry_of(promoted[2])
    first = entry.cases[0].id
    with pytest.raises(InputError, match=f"case {first} got no new model"):
        remodel_entry(entry, {}, info())
    failed = models_of(entry)
    failed[first] = WithheldModel.model_validate(not_modelled("jax refused it").model_dump())
    with pytest.raises(InputError, match=f"case {first} could not be modelled: jax refused"):
        remodel_entry(entry, failed, info())
    newer = entry.model_copy(
        update={"cases": [c.model_copy(update={"model": c.model.model_copy(
            update={"revision": MODEL_REVISION + 1})}) for c in entry.cases]}
    )  # fmt: skip
    with pytest.raises(InputError, match=r"newer ci-bench .* upgrade ci-bench to remodel it"):
        remodel_entry(newer, models_of(entry), info())


def test_write_remodel_never_overwrites_an_entry_changed_meanwhile(promoted, tmp_path):
    from ci_bench.errors import InputError
    from ci_bench.schema import BaselineFile
    from ci_bench.store.remodel import remodel_entry, write_remodel

    folder = tmp_path / "b"
    folder.mkdir()
    path = folder / "mm_v1.0.0.json"
    doc = json.loads(aged(promoted[2]))
    # Another device's entry beside it: kept, byte for byte.
    other = json.loads(json.dumps(doc["entries"][0]))
    other["device"] |= {"platform": "tpu", "device_kind": "TPU v5 lite", "cpu_model": "x"}
    doc["entries"].append(other)
    path.write_text(json.dumps(doc))
    entry = BaselineFile.model_validate(doc).entries[0]
    remodel = remodel_entry(entry, models_of(entry_of(promoted[2])), info())
    assert remodel.action == "remodelled"
    # Promoted again with --force meanwhile (another tag): the remodel is refused.
    moved = json.loads(json.dumps(doc))
    moved["entries"][0]["provenance"]["tag"] = "v9"
    path.write_text(json.dumps(moved))
    with pytest.raises(InputError, match="changed while it was being remodelled"):
        write_remodel(path, entry, remodel)
    assert json.loads(path.read_text()) == moved
    # Unchanged: written, the other device's entry as it was.
    path.write_text(json.dumps(doc))
    write_remodel(path, entry, remodel)
    written = json.loads(path.read_text())
    assert written["entries"][1] == json.loads(json.dumps(doc))["entries"][1]
    assert written["entries"][0]["provenance"]["remodelled"]["revision"] == MODEL_REVISION


def test_a_folder_keeps_going_past_an_entry_it_cannot_model(promoted):
    """One file's commit is not in the clone: said, left alone, and the other file of the
    folder is still remodelled and written; exit 2."""
    folder, measured, text = promoted
    fresh(folder, aged(text))
    other = json.loads(aged(text))
    other["version"] = "1.0.1"
    for case in other["entries"][0]["cases"]:
        case["version"] = "1.0.1"
    other["entries"][0]["provenance"]["commit"] = "f" * 40
    (folder / "b" / "mm_v1.0.1.json").write_text(json.dumps(other))
    try:
        done = run_cli("remodel", "b", "-q", cwd=folder)
        assert done.returncode == ExitCode.USAGE, done.stderr
        first, second = done.stdout.splitlines()
        assert first.startswith(f"remodelled: {BASELINE} (cpu:"), first
        assert second.startswith("left: b/mm_v1.0.1.json (cpu:"), second
        assert "its measured commit: ffffffffffff" in second
        assert "1 baseline entry could not be modelled" in done.stderr
        assert (
            json.loads((folder / BASELINE).read_text())["entries"][0]["provenance"]["remodelled"][
                "commit"
            ]
            == measured
        )
        assert json.loads((folder / "b" / "mm_v1.0.1.json").read_text()) == other
    finally:
        (folder / "b" / "mm_v1.0.1.json").unlink()


def test_a_dirty_checkout_is_recorded_and_remodel_asks_for_the_commit_measured(promoted):
    """Results measured with uncommitted changes to a kernel: promotion records it
    (provenance.dirty) and says so; remodel will not model the entry from its commit alone,
    whose code is not what was measured, until --at names one, then keeps to the one named.
    The clean promotion records false."""
    folder, measured, text = promoted
    assert json.loads(text)["entries"][0]["provenance"]["dirty"] is False
    (folder / "mm.py").write_text(MM.format(version="1.0.0", blocks="64, 128, 128"))
    try:
        results = folder / "dirty.json"
        done = run_cli(
            "run", "--repeats", "3", "--warmup", "1", "-q", "-o", str(results), cwd=folder
        )
        assert done.returncode == ExitCode.OK, done.stderr
        done = run_cli("promote", str(results), "--baselines-dir", "dirty", cwd=folder)
        assert done.returncode == ExitCode.OK, done.stderr
        created, note = done.stdout.splitlines()
        assert created.startswith("created: dirty/mm_v1.0.0.json (cpu:"), created
        assert note == (
            f"note: measured with uncommitted changes on {measured[:12]} (provenance.dirty): "
            "ci-bench remodel of this entry needs --at a commit that holds the code measured"
        )
        path = folder / "dirty" / "mm_v1.0.0.json"
        doc = json.loads(path.read_text())
        assert doc["schema_version"] == 7
        assert doc["entries"][0]["provenance"]["dirty"] is True
        assert doc["entries"][0]["provenance"]["commit"] == measured
        before = path.read_text()

        done = run_cli("remodel", "dirty/mm_v1.0.0.json", "-q", cwd=folder)
        assert done.returncode == ExitCode.USAGE, done.stderr
        assert done.stdout.startswith("left: dirty/mm_v1.0.0.json (cpu:"), done.stdout
        assert f"measured with uncommitted changes on {measured[:12]}" in done.stdout
        assert "give --at REF, a commit that does" in done.stdout
        assert path.read_text() == before  # nothing written
        assert len(done.stderr.strip().splitlines()) == 1

        # Committed, the code measured has a commit: --at models the entry from it (an
        # older revision's models, so they are written), and the entry records it, so a
        # later remodel needs no --at.
        held = commit(folder, "the tiles measured", blocks="64, 128, 128")
        path.write_text(aged(before))
        done = run_cli("remodel", "dirty/mm_v1.0.0.json", "--at", held, "-q", cwd=folder)
        assert done.returncode == ExitCode.OK, done.stdout + done.stderr
        assert done.stdout.startswith("remodelled: dirty/mm_v1.0.0.json (cpu:"), done.stdout
        provenance = json.loads(path.read_text())["entries"][0]["provenance"]
        assert provenance["dirty"] is True
        assert provenance["remodelled"]["commit"] == held
        done = run_cli("remodel", "dirty/mm_v1.0.0.json", "--check", "-q", cwd=folder)
        assert done.returncode == ExitCode.OK, done.stdout + done.stderr
        assert done.stdout.startswith("unchanged: dirty/mm_v1.0.0.json (cpu:"), done.stdout
        assert f"at {held[:12]}" in done.stdout
    finally:
        git(folder, "reset", "-q", "--hard", measured)
        for leftover in (folder / "dirty.json", folder / "dirty" / "mm_v1.0.0.json"):
            leftover.unlink(missing_ok=True)
