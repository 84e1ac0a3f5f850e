"""``ci-bench export``: Bencher BMF and github-action-benchmark, validated against schemas
written from each format's documentation (sources cited in tests/schemas/*.schema.json):

- BMF: https://bencher.dev/docs/reference/bencher-metric-format
- customSmallerIsBetter: README and src/extract.ts of benchmark-action/github-action-benchmark
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import jsonschema
import pytest

from ci_bench.errors import ExitCode
from ci_bench.report.export import to_bmf, to_gab
from ci_bench.store.files import dump_model
from tests.conftest import run_cli
from tests.harness.factories import case, results

SCHEMAS = Path(__file__).parent / "schemas"
ERROR = "matmul/B1-M256-K256-N256/float32"


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


@pytest.fixture
def run():
    return results(
        [
            case("matmul/B1-M128-K128-N128/float32", 1.0, spread=0.04),
            case("matmul/B1-M1024-K1024-N1024/bfloat16", 3.0, spread=0.02),
            case(ERROR, status="error"),
        ]
    )


def test_bmf_validates_and_carries_latency_in_ns_with_quartile_bounds(run):
    data = to_bmf(run)
    jsonschema.validate(data, schema("bmf"))
    assert ERROR not in data  # an error case has no figures
    first = run.cases[0]
    latency = data[first.id]["latency"]
    q1, _, q3 = statistics.quantiles(first.pallas.samples_ms, n=4, method="inclusive")
    assert latency["value"] == pytest.approx(first.pallas.median_ms * 1e6)
    assert latency["lower_value"] == pytest.approx(q1 * 1e6)
    assert latency["upper_value"] == pytest.approx(q3 * 1e6)
    assert latency["lower_value"] < latency["value"] < latency["upper_value"]
    throughput = data[first.id]["throughput"]
    assert throughput["value"] == pytest.approx(1e3 / first.pallas.median_ms)
    assert throughput["lower_value"] < throughput["value"] < throughput["upper_value"]
    assert data[first.id]["tflops"]["value"] == pytest.approx(first.tflops)


def test_the_bmf_schema_rejects_what_bencher_would(run):
    data = to_bmf(run)
    name = next(iter(data))
    data[name]["latency"]["value"] = "88"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema("bmf"))


def test_gab_validates_as_custom_smaller_is_better(run):
    data = to_gab(run)
    jsonschema.validate(data, schema("gab"))
    assert [d["name"] for d in data] == [c.id for c in run.cases if c.status == "ok"]
    second = run.cases[1]
    entry = data[1]
    assert entry["unit"] == "ms"
    assert entry["value"] == pytest.approx(second.pallas.median_ms)
    assert entry["range"].startswith("± ")
    assert "matmul v0.1.0 on cpu:cpu:Test CPU 9000" in entry["extra"]


def test_the_gab_schema_needs_a_unit(run):
    data = to_gab(run)
    del data[0]["unit"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema("gab"))


@pytest.mark.parametrize("fmt", ["bmf", "gab"])
def test_export_cli_writes_a_valid_file(tmp_path, run, fmt):
    path = tmp_path / "results.json"
    path.write_text(dump_model(run))
    out = tmp_path / f"{fmt}.json"
    proc = run_cli("export", str(path), "--format", fmt, "-o", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    jsonschema.validate(json.loads(out.read_text()), schema(fmt))


def test_export_of_a_broken_file_is_one_line_exit_2(tmp_path):
    path = tmp_path / "results.json"
    path.write_text('{"schema_version": 1, "meta": {}}')
    proc = run_cli("export", str(path), "--format", "bmf", cwd=tmp_path)
    assert proc.returncode == ExitCode.USAGE
    assert proc.stderr.startswith("ci-bench: error:")
    assert "Traceback" not in proc.stderr
