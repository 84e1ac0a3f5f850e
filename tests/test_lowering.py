"""``ci-bench lower``: Pallas lowered for TPU on this CPU machine, failures as error cases."""

from __future__ import annotations

import json

from ci_bench.errors import ExitCode
from ci_bench.measure.lowering import custom_calls, pallas_kind
from ci_bench.schema import RESULTS_SCHEMA_VERSION, Results
from ci_bench.schema.lowering import LoweringResults
from ci_bench.store.files import read_model
from tests.conftest import run_cli, write_project


def test_a_lane_block_that_interprets_fine_is_a_tpu_lowering_error(tmp_path):
    write_project(tmp_path, ["lane_block"])
    run_out, low_out = tmp_path / "run.json", tmp_path / "lower.json"

    ran = run_cli("run", "--repeats", "2", "--warmup", "1", "-o", str(run_out), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    (case,) = read_model(
        run_out, Results, what="results", schema_version=RESULTS_SCHEMA_VERSION
    ).cases
    assert case.status == "ok"
    assert case.correctness.ok

    low = run_cli("lower", "--platform", "tpu", "-o", str(low_out), cwd=tmp_path)
    assert low.returncode == ExitCode.FAILED, low.stderr
    doc = LoweringResults.model_validate_json(low_out.read_text())
    (lowered,) = doc.cases
    assert lowered.status == "error"
    assert lowered.id == "lane_block/R16-C200/float32"
    assert "lowering for tpu as v4i failed" in lowered.error
    assert "divisible by 8 and 128" in lowered.error  # jax's own message
    assert "Traceback" in lowered.traceback
    assert "lane_block/R16-C200/float32" in low.stdout
    assert "0/1 cases lower" in low.stdout

    # the same check inside run: the case becomes an error and is not measured
    both = run_cli(
        "run", "--lower", "tpu", "--repeats", "2", "-o", str(run_out), "--force", cwd=tmp_path
    )
    assert both.returncode == ExitCode.NOTHING_MEASURED, both.stderr
    results = read_model(run_out, Results, what="results", schema_version=RESULTS_SCHEMA_VERSION)
    assert results.meta.settings.lowered_for == "tpu"
    assert results.cases[0].status == "error"
    assert results.cases[0].pallas is None
    assert "divisible by 8 and 128" in results.cases[0].error


def test_project_kernels_lower_to_mosaic_for_every_smoke_case(tmp_path):
    write_project(tmp_path, ["kernels.matmul", "kernels.gla"])
    out = tmp_path / "lower.json"
    done = run_cli("lower", "--platform", "tpu", "--profile", "smoke", "-o", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert doc["kind"] == "lowering"
    assert doc["schema_version"] == 6
    # No config target-chips and no TPU here: every chip the model knows is checked.
    assert doc["meta"]["chips"] == ["v4i", "v4", "v5e", "v5p", "v6e", "7", "7x", "8i"]
    # matmul and gla: 6 forward and 6 backward cases each (the backward kernels lower too)
    assert len(doc["cases"]) == 24
    by_kernel = {k: [c for c in doc["cases"] if c["kernel"] == k] for k in ("matmul", "gla")}
    for cases in by_kernel.values():
        assert sum(c["id"].endswith("/backward") for c in cases) == 6
    for case in doc["cases"]:
        assert case["status"] == "ok", case
        assert case["kind"] == "mosaic"
        assert "tpu_custom_call" in case["custom_calls"]
        # Lowered as each chip, each ok.
        assert {c: v["status"] for c, v in case["chips"].items()} == dict.fromkeys(
            doc["meta"]["chips"], "ok"
        )
        # The smoke profile's cases fit every chip's default scoped VMEM, and every one is
        # timed (float32 dots are priced since model revision 5).
        assert case["model"]["status"] == "ok", case["model"]
        assert all(chip["fits"] for chip in case["model"]["chips"].values())


def test_custom_call_targets_name_the_pallas_backend():
    text = (
        '%0 = stablehlo.custom_call @tpu_custom_call(%arg0) {backend_config = "x"}\n'
        '%1 = "stablehlo.custom_call"(%0) {call_target_name = "__gpu$xla.gpu.triton"}\n'
        "%2 = stablehlo.custom_call @Sharding(%1)\n"
    )
    targets = custom_calls(text)
    assert targets == ["tpu_custom_call", "__gpu$xla.gpu.triton", "Sharding"]
    assert pallas_kind(targets) == "mosaic"
    assert pallas_kind(targets[1:]) == "triton"
    assert pallas_kind(["Sharding"]) is None


def test_an_emit_pipeline_kernel_lowers_and_is_modelled_as_each_target_chip(tmp_path):
    # jax asks for the chip while tracing emit_pipeline: on this CPU, "Unsupported TPU
    # device kind: cpu" unless ci-bench traces as the target chip.
    write_project(tmp_path, ["emit_pipeline_kernel"])
    out = tmp_path / "lower.json"
    done = run_cli(
        "lower", "--platform", "tpu", "--chip", "v5e", "--chip", "7x", "-o", str(out), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr + done.stdout
    doc = LoweringResults.model_validate_json(out.read_text())
    assert doc.schema_version == 6
    assert doc.meta.chips == ["v5e", "7x"]
    (case,) = doc.cases
    assert case.status == "ok", case.error
    assert {c: v.status for c, v in case.chips.items()} == {"v5e": "ok", "7x": "ok"}
    assert all(v.kind == "mosaic" for v in case.chips.values())
    assert "1/1 cases lower for tpu as v5e, 7x" in done.stdout

    analyzed = run_cli("analyze", "--chip", "v5e", "--format", "json", cwd=tmp_path)
    assert analyzed.returncode == 0, analyzed.stderr
    model = json.loads(analyzed.stdout)["cases"][0]
    assert model["status"] == "ok", model["reason"]


def test_a_failure_of_the_machine_is_a_host_error_never_the_kernels(tmp_path):
    from ci_bench.contract.spec import Case
    from ci_bench.measure.lowering import as_case_error, is_host_failure, lower_case
    from tests.fixtures.emit_pipeline_kernel import SPEC

    case = Case("emit_pipeline", {"R": 512}, "float32")
    here = lower_case(SPEC, case, "tpu")  # as this CPU: jax cannot answer its chip query
    assert here.status == "host_error"
    assert "Unsupported TPU device kind: cpu" in here.error
    assert as_case_error(here) is None  # run --lower: not the case's error
    assert lower_case(SPEC, case, "tpu", chip="v6e").status == "ok"
    assert is_host_failure("ValueError: Unsupported TPU device kind: cpu")
    assert not is_host_failure("ValueError: block shape must be divisible by 8 and 128")


def test_version_2_lowering_files_are_still_read(tmp_path):
    from ci_bench.schema.lowering import LOWERING_READABLE

    old = {
        "schema_version": 2,
        "kind": "lowering",
        "meta": {
            "tool_version": "0.1.0",
            "started_at": "2026-10-01T00:00:00Z",
            "platform": "tpu",
            "profile": "smoke",
            "jax": "0.10.2",
            "jaxlib": "0.10.2",
            "kernels": {"matmul": "0.1.0"},
            "chips": ["v5e"],
        },
        "cases": [
            {
                "id": "matmul/B1-M128-K128-N128/float32",
                "kernel": "matmul",
                "version": "0.1.0",
                "params": {"B": 1, "M": 128, "K": 128, "N": 128},
                "dtype": "float32",
                "platform": "tpu",
                "status": "ok",
                "kind": "mosaic",
                "custom_calls": ["tpu_custom_call"],
            }
        ],
    }
    path = tmp_path / "lowering.json"
    path.write_text(json.dumps(old))
    doc = read_model(path, LoweringResults, what="lowering", schema_version=LOWERING_READABLE)
    assert doc.schema_version == 2
    assert doc.cases[0].chips == {}
