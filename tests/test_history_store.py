"""The history store: records from results and baselines, idempotent merge, retention."""

from __future__ import annotations

import statistics
from datetime import UTC, datetime, timedelta

import pytest

from ci_bench.errors import InputError
from ci_bench.report.history import build_groups
from ci_bench.schema.history import HistoryRecord
from ci_bench.store.baselines import plan_promotions, write_promotions
from ci_bench.store.files import dump_model
from ci_bench.store.history import (
    MAX_FILE_BYTES,
    append_local,
    device_file,
    load_local,
    merge_record,
    merge_text,
    parse_jsonl,
    record_from_results,
    render_jsonl,
)
from tests.harness.factories import V5E, case, results
from tests.harness.history_data import story

M128 = "matmul/B1-M128-K128-N128/float32"


def record_at(i: int, device=V5E, source="run") -> HistoryRecord:
    run = results([case(M128, 1.0 + i / 100)], device=device, commit=f"{i:040x}")
    meta = run.meta.model_copy(
        update={"started_at": datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=i)}
    )
    return record_from_results(run.model_copy(update={"meta": meta}), source=source)


def test_a_record_keeps_summary_statistics_and_the_verdict():
    run = results([case(M128, 2.0, spread=0.05), case("matmul/B1-M8-K8-N8/float32", status="x")])
    record = record_from_results(run, verdicts={M128: "regression"}, pr=12)
    point, error = record.cases
    samples = run.cases[0].pallas.samples_ms
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    assert point.median_ms == pytest.approx(statistics.median(samples), rel=1e-5)
    assert (point.q1_ms, point.q3_ms) == (pytest.approx(q1, rel=1e-5), pytest.approx(q3, rel=1e-5))
    assert point.min_ms == pytest.approx(min(samples), rel=1e-5)
    assert point.tflops == pytest.approx(run.cases[0].tflops, rel=1e-5)
    assert point.verdict == "regression"
    assert point.repeats == len(samples)
    assert error.status == "error"
    assert error.median_ms is None
    assert error.verdict is None
    assert record.commit == run.meta.git.commit
    assert record.pr == 12
    assert record.device.identity == run.meta.device.identity
    assert record.kernels == {"matmul": "0.1.0"}


def test_results_without_a_commit_cannot_be_recorded():
    run = results([case(M128)])
    meta = run.meta.model_copy(update={"git": run.meta.git.model_copy(update={"commit": None})})
    with pytest.raises(InputError, match=r"meta\.git\.commit"):
        record_from_results(run.model_copy(update={"meta": meta}), origin="r.json")


def test_merging_the_same_commit_twice_changes_nothing():
    first = record_at(1)
    merged = merge_record([], first)
    assert merged == [first]
    assert merge_record(merged, record_at(1)) is None
    # A promotion of the same commit is another record, not a duplicate.
    assert len(merge_record(merged, record_at(1, source="promotion"))) == 2


def test_retention_keeps_the_newest_records_per_device():
    cpu = record_at(0, device=results([case(M128)]).meta.device)
    records = [cpu]
    for i in range(1, 8):
        records = merge_record(records, record_at(i), keep=3)
    assert [r.commit for r in records] == [cpu.commit] + [f"{i:040x}" for i in (5, 6, 7)]
    with pytest.raises(InputError, match="--keep"):
        merge_record(records, record_at(9), keep=0)


def test_the_file_stays_readable_through_the_contents_api():
    records = story().records
    one = len(render_jsonl(records[:1]).encode())
    text = None
    for record in records[:12]:
        text = merge_text(text, record, keep=10_000, origin="f", max_bytes=5 * one) or text
    kept = parse_jsonl(text, "f")
    # Past the size bound the oldest records go first, whatever ``keep`` allows.
    assert len(text.encode()) <= 5 * one
    assert [r.commit for r in kept] == [r.commit for r in records[7:12]]
    assert MAX_FILE_BYTES < 1_000_000  # GitHub's inline limit for the contents API


def test_a_bad_line_names_file_line_and_field():
    good = render_jsonl([record_at(1)])
    with pytest.raises(InputError, match=r"h\.jsonl:2: invalid JSON"):
        parse_jsonl(good + "{nope\n", "h.jsonl")
    with pytest.raises(InputError, match=r"h\.jsonl:1: schema_version: 3 is not supported"):
        parse_jsonl(good.replace('"schema_version":2', '"schema_version":3'), "h.jsonl")
    with pytest.raises(InputError, match=r"h\.jsonl:1: commit"):
        parse_jsonl(good.replace('"commit":"', '"commit":"" , "x":"'), "h.jsonl")


def test_local_mode_reads_history_results_and_baselines(tmp_path):
    history = tmp_path / "history"
    assert append_local(history, record_at(1))[0] == "written"
    outcome, path = append_local(history, record_at(1))
    assert outcome == "unchanged"
    assert path.name == device_file(V5E.identity)
    results_file = tmp_path / "results.json"
    run = results([case(M128)], commit="f" * 40)
    results_file.write_text(dump_model(run))
    baselines = tmp_path / "baselines"
    promotions = plan_promotions(
        run, {}, promoted_at=datetime.now(UTC), tag="v0.1.0", force=False, source="r"
    )
    write_promotions(baselines, promotions)
    records = load_local([history], [results_file], baselines)
    assert sorted(r.source for r in records) == ["baseline", "run", "run"]
    assert {r.commit for r in records} == {f"{1:040x}", "f" * 40}
    with pytest.raises(InputError, match="history folder not found"):
        load_local([tmp_path / "nope"])


def test_one_commit_promoted_for_two_kernels_shows_in_both():
    gla = "gla/B1-T64-H2-D16/float32"
    matmul_run = results([case(M128)], commit="a" * 40)
    gla_run = results([case(gla)], commit="a" * 40)
    records = [record_from_results(r, source="promotion") for r in (matmul_run, gla_run)]
    records.append(record_from_results(matmul_run))  # the run itself beats its promotion
    groups = build_groups(records)
    assert [(g.kernel, [c.source for c in g.commits]) for g in groups] == [
        ("gla", ["promotion"]),
        ("matmul", ["run"]),
    ]
