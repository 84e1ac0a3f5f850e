from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from ci_bench.errors import InputError
from ci_bench.schema import BASELINE_SCHEMA_VERSION
from ci_bench.store.baseline_text import render_baseline
from ci_bench.store.baselines import (
    BaselineFile,
    PromotionRefusedError,
    available_versions,
    baseline_path,
    entry_from_results,
    find_baseline,
    load_baseline,
    merge_entry,
    plan_promotions,
    version_key,
    write_promotions,
)
from tests.harness.factories import CPU, V5E, case, results

A = "matmul/B1-M128-K128-N128/float32"
WHEN = datetime(2026, 11, 2, tzinfo=UTC)


def write(folder, version="0.1.0", device=CPU, kernel="matmul"):
    cid = A.replace("matmul", kernel)
    res = results([case(cid, version=version)], device=device)
    entry = entry_from_results(res, kernel, WHEN, f"v{version}")
    doc = BaselineFile(kernel=kernel, version=version, entries=[entry])
    path = baseline_path(folder, kernel, version)
    path.write_text(render_baseline(doc))
    return path


def test_semver_order_puts_prereleases_first():
    versions = ["0.10.0", "0.2.0", "0.2.0-rc1", "1.0.0", "0.9.9"]
    assert sorted(versions, key=version_key) == ["0.2.0-rc1", "0.2.0", "0.9.9", "0.10.0", "1.0.0"]


def test_lookup_prefers_the_exact_version(tmp_path):
    write(tmp_path, "0.1.0")
    write(tmp_path, "0.2.0")
    found = find_baseline(tmp_path, "matmul", "0.2.0")
    assert found.path.name == "matmul_v0.2.0.json"
    assert found.note is None


def test_lookup_falls_back_to_the_nearest_lower_version_and_says_so(tmp_path):
    write(tmp_path, "0.1.0")
    write(tmp_path, "0.1.5")
    write(tmp_path, "0.3.0")
    write(tmp_path, "0.1.0", kernel="gla")
    found = find_baseline(tmp_path, "matmul", "0.2.0")
    assert found.baseline.version == "0.1.5"
    assert found.note == "compared with v0.1.5: no baseline yet for v0.2.0"
    assert available_versions(tmp_path, "matmul") == ["0.1.0", "0.1.5", "0.3.0"]


def test_lookup_with_no_older_version_finds_nothing(tmp_path):
    write(tmp_path, "0.3.0")
    found = find_baseline(tmp_path, "matmul", "0.2.0")
    assert found.baseline is None
    assert "no baseline" in found.note
    assert find_baseline(tmp_path / "absent", "matmul", "0.2.0").baseline is None


def test_a_pinned_version_must_exist(tmp_path):
    write(tmp_path, "0.1.0")
    assert find_baseline(tmp_path, "matmul", "0.2.0", pinned="0.1.0").baseline.version == "0.1.0"
    with pytest.raises(InputError, match=r"pinned version 0\.0\.9"):
        find_baseline(tmp_path, "matmul", "0.2.0", pinned="0.0.9")


def test_a_baseline_of_another_kernel_is_refused(tmp_path):
    path = write(tmp_path, kernel="gla")
    with pytest.raises(InputError, match="kernel: holds 'gla', expected 'matmul'"):
        load_baseline(path, "matmul")
    renamed = tmp_path / "matmul_v0.1.0.json"
    path.rename(renamed)
    with pytest.raises(InputError, match="expected 'matmul'"):
        find_baseline(tmp_path, "matmul", "0.1.0")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: "{", "invalid JSON"),
        (  # the version after this ci-bench's: written by a newer one
            lambda d: {**d, "schema_version": BASELINE_SCHEMA_VERSION + 1},
            f"schema_version: {BASELINE_SCHEMA_VERSION + 1} is not supported",
        ),
        (lambda d: {**d, "entries": [{**d["entries"][0], "cases": "x"}]}, "entries.0.cases"),
        (lambda d: {**d, "entries": d["entries"] * 2}, "two entries for the same device"),
    ],
)
def test_a_broken_baseline_is_a_one_line_input_error(tmp_path, mutate, message):
    path = write(tmp_path)
    body = mutate(json.loads(path.read_text()))
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    with pytest.raises(InputError, match=message) as info:
        load_baseline(path)
    assert str(path) in str(info.value)


def entry(device=CPU, tag="v0.1.0"):
    return entry_from_results(results([case(A)], device=device), "matmul", WHEN, tag)


def test_promotion_creates_adds_and_keeps_other_devices():
    created = merge_entry(None, "matmul", "0.1.0", entry(V5E), force=False)
    assert created.action == "created"
    added = merge_entry(created.document, "matmul", "0.1.0", entry(CPU), force=False)
    assert added.action == "added"
    assert [e.device.device_kind for e in added.document.entries] == ["TPU v5 lite", "cpu"]


def test_promotion_refuses_to_overwrite_a_device_without_force():
    doc = merge_entry(None, "matmul", "0.1.0", entry(tag="v0.1.0"), force=False).document
    with pytest.raises(PromotionRefusedError, match="use --force"):
        merge_entry(doc, "matmul", "0.1.0", entry(tag=None), force=False)
    replaced = merge_entry(doc, "matmul", "0.1.0", entry(tag=None), force=True)
    assert replaced.action == "replaced"
    assert replaced.document.entries[0].provenance.tag is None


def test_re_promoting_the_same_tag_changes_nothing():
    doc = merge_entry(None, "matmul", "0.1.0", entry(tag="v0.1.0"), force=False).document
    again = merge_entry(doc, "matmul", "0.1.0", entry(tag="v0.1.0"), force=False)
    assert again.action == "unchanged"
    assert again.document is doc


def test_results_with_errors_or_unfinished_are_not_promoted():
    broken = results([case(A), case("matmul/B4-M1-K1-N1/float32", status="error")])
    with pytest.raises(PromotionRefusedError, match="results contain errors"):
        plan_promotions(broken, {}, promoted_at=WHEN, tag=None, force=False, source="r.json")
    unfinished = results([case(A)])
    unfinished = unfinished.model_copy(
        update={"meta": unfinished.meta.model_copy(update={"complete": False})}
    )
    with pytest.raises(PromotionRefusedError, match="did not finish"):
        plan_promotions(unfinished, {}, promoted_at=WHEN, tag=None, force=False, source="r.json")


def test_unchanged_files_are_not_rewritten(tmp_path):
    path = write(tmp_path)
    before = path.stat().st_mtime_ns
    doc = load_baseline(path)
    same = merge_entry(doc, "matmul", "0.1.0", entry(tag="v0.1.0"), force=False)
    assert write_promotions(tmp_path, [same]) == []
    assert path.stat().st_mtime_ns == before
