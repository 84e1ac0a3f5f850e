"""Baselines promoted before modes existed (format 2) still compare (issue 21).

``tests/fixtures/baselines_v2/matmul_v0.1.0.json`` was written by ``ci-bench promote`` at
format 2. Today's smoke run of matmul adds backward cases; its forward cases keep their
ids, so they are judged against that file: never ``incomparable`` or ``new``.
"""

from __future__ import annotations

import json

from ci_bench.schema import (
    BASELINE_READABLE,
    BASELINE_SCHEMA_VERSION,
    RESULTS_SCHEMA_VERSION,
    BaselineFile,
    Results,
)
from ci_bench.store.files import read_model
from tests.conftest import FIXTURES, run_cli, write_project

OLD = FIXTURES / "baselines_v2" / "matmul_v0.1.0.json"


def test_the_format_2_fixture_reads_as_forward_cases_of_pallas_and_native():
    baseline = read_model(OLD, BaselineFile, what="baseline", schema_version=BASELINE_READABLE)
    assert baseline.schema_version == 2
    (entry,) = baseline.entries
    assert len(entry.cases) == 6
    for case in entry.cases:
        assert case.mode == "forward"
        assert "/backward" not in case.id
        assert (case.implementations.subject, case.implementations.baseline) == ("pallas", "native")
        assert case.implementations.others == {}


def test_forward_baselines_promoted_at_the_old_format_still_compare(tmp_path):
    write_project(tmp_path, ["kernels.matmul"])
    out = tmp_path / "r.json"
    # the fixture's own settings, so only the code between them differs
    run = run_cli(
        "run", "--profile", "smoke", "--repeats", "5", "--warmup", "1", "-o", str(out), cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    results = read_model(out, Results, what="results", schema_version=RESULTS_SCHEMA_VERSION)
    # a baseline compares only on the device it was measured on: this machine's, here; and
    # only for the kernel's version: the fixture's format, relabelled as today's matmul
    old = json.loads(OLD.read_text())
    old["entries"][0]["device"] = results.meta.device.model_dump(mode="json")
    old["version"] = results.meta.kernels["matmul"]
    for stored in old["entries"][0]["cases"]:
        stored["version"] = old["version"]
    name = f"matmul_v{old['version']}.json"
    folder = tmp_path / "baselines"
    folder.mkdir()
    (folder / name).write_text(json.dumps(old))
    report_path = tmp_path / "report.json"
    compared = run_cli(
        "compare", str(out), "--baselines-dir", str(folder), "-o", str(report_path), cwd=tmp_path
    )
    assert compared.returncode in (0, 1), compared.stderr  # 1 only for a timing regression
    verdicts = {c["id"]: c for c in json.loads(report_path.read_text())["cases"]}
    forward = [v for i, v in verdicts.items() if not i.endswith("/backward")]
    backward = [v for i, v in verdicts.items() if i.endswith("/backward")]
    assert len(forward) == 6
    assert len(backward) == 6
    for v in forward:
        assert v["verdict"] not in ("incomparable", "new", "missing", "error"), v
        assert v["baseline"]["id"] == v["id"]
    assert all(v["verdict"] == "new" for v in backward)  # no backward numbers were stored
    # promoting today's run beside an old entry of another machine keeps that entry and
    # writes the file at the current format
    old["entries"][0]["device"]["cpu_model"] = "Fixture CPU of another runner"
    (folder / name).write_text(json.dumps(old))
    promoted = run_cli(
        "promote", str(out), "--baselines-dir", str(folder), "--tag", "v0.1.0", cwd=tmp_path
    )
    assert promoted.returncode == 0, promoted.stderr
    doc = read_model(folder / name, BaselineFile, what="baseline", schema_version=BASELINE_READABLE)
    assert doc.schema_version == BASELINE_SCHEMA_VERSION
    assert len(doc.entries) == 2
    kept = next(e for e in doc.entries if e.device.cpu_model == "Fixture CPU of another runner")
    assert [c.id for c in kept.cases] == [c["id"] for c in old["entries"][0]["cases"]]
    mine = doc.entry_for(results.meta.device)
    assert mine is not None
    assert sum(c.mode == "backward" for c in mine.cases) == 6
