"""``ci-bench lower --platform cuda`` on this CPU, no CUDA plugin: every case lowered through
Triton or Mosaic GPU as the kernel chose, as each target GPU, each rule it breaks named."""

from __future__ import annotations

import json

import pytest

from ci_bench.errors import ExitCode
from ci_bench.measure.lowering_rules import host_reason, named
from ci_bench.schema.gpus import GPU_NAMES, gpu_for_device_kind
from tests.conftest import run_cli, write_project

GPUS = list(GPU_NAMES)


def _lower(tmp_path, kernels, *flags):
    write_project(tmp_path, kernels)
    out = tmp_path / "lower.json"
    done = run_cli("lower", "--platform", "cuda", "-q", "-o", str(out), *flags, cwd=tmp_path)
    return done, json.loads(out.read_text()) if out.exists() else None


def test_the_project_kernels_lower_through_triton_as_every_gpu(tmp_path):
    done, doc = _lower(tmp_path, ["kernels.matmul", "kernels.gla"], "--profile", "smoke")
    assert done.returncode == 0, done.stdout + done.stderr
    assert doc["schema_version"] == 6
    assert doc["meta"]["platform"] == "cuda"
    assert doc["meta"]["chips"] == GPUS  # no GPU here, no config: every GPU the table knows
    assert len(doc["cases"]) == 24  # 12 matmul and 12 gla, forward and backward
    for case in doc["cases"]:
        assert case["status"] == "ok", case["error"]
        assert case["kind"] == "triton", case["id"]  # chosen by the kernel, not jax's default
        assert {g: c["status"] for g, c in case["chips"].items()} == dict.fromkeys(GPUS, "ok")
    assert "24/24 cases lower for cuda as h100, h200, b200" in done.stdout


def test_jax_own_gpu_ops_lower_as_jax_ships_them(tmp_path):
    """jax's Triton ops and Mosaic GPU ops (``pallas.ops.gpu``), called as jax ships them;
    the Mosaic GPU matmul reads the SM count while tracing (the GPU seam answers it), the
    Mosaic GPU attention the CUDA runtime's version (only the plugin can: host_error)."""
    kernels = ["jax_gpu_softmax", "jax_gpu_layer_norm", "jax_gpu_mha", "jax_mgpu_hopper_matmul"]
    kernels += ["jax_mgpu_blackwell_matmul", "jax_mgpu_attention"]
    done, doc = _lower(tmp_path, kernels, "--chip", "h100", "--chip", "b200")
    assert done.returncode == 0, done.stdout + done.stderr  # a host_error is not a red check
    by_kernel = {c["kernel"]: c for c in doc["cases"]}
    for name in ("jax_gpu_softmax", "jax_gpu_layer_norm", "jax_gpu_mha"):
        assert (by_kernel[name]["status"], by_kernel[name]["kind"]) == ("ok", "triton"), name
    for name in ("jax_mgpu_hopper_matmul", "jax_mgpu_blackwell_matmul"):
        assert by_kernel[name]["status"] == "ok", by_kernel[name]["error"]
        assert by_kernel[name]["kind"] == "mosaic_gpu"
        assert by_kernel[name]["custom_calls"] == ["mosaic_gpu_v2"]
        assert set(by_kernel[name]["chips"]) == {"h100", "b200"}
    attention = by_kernel["jax_mgpu_attention"]
    assert attention["status"] == "host_error"
    assert "CUDA runtime for its version" in attention["error"]
    assert "could not be lowered on this machine" in done.stdout


def test_each_gpu_rule_broken_is_named_with_its_figures(tmp_path):
    done, doc = _lower(tmp_path, ["gpu_rule_breakers"], "--chip", "h200")
    assert done.returncode == ExitCode.FAILED, done.stderr
    rules = {c["id"]: (c["status"], c["rule"], c["error"]) for c in doc["cases"]}
    status, rule, error = rules["gpu_rule_breakers/KIND1/float32"]
    assert (status, rule) == ("error", "power_of_2")
    assert "lowering for cuda as h200 failed: power-of-2 rule (Triton)" in error
    assert "(96, 128)" in error
    status, rule, error = rules["gpu_rule_breakers/KIND2/float32"]
    assert (status, rule) == ("error", "shared_memory")
    # in and out blocks of 512 x 512 float32 (1 MiB each) and Mosaic GPU's 8 bytes
    assert "needs 2,097,160 B per block, the GPU allows 232,448 B" in error
    status, rule, error = rules["gpu_rule_breakers/KIND3/float32"]
    assert (status, rule) == ("error", "unsupported_primitive")
    assert "unsupported primitive (Triton): cummax has no lowering rule" in error
    assert doc["cases"][0]["chips"]["h200"]["rule"] == "power_of_2"


def test_interpret_mode_misses_what_the_gpu_lowering_catches(tmp_path):
    """The same kernels run (interpreted) and are correct on a CPU: only lowering tells."""
    write_project(tmp_path, ["gpu_rule_breakers"])
    out = tmp_path / "run.json"
    done = run_cli("run", "--repeats", "1", "--warmup", "0", "-o", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cases = json.loads(out.read_text())["cases"]
    assert [c["status"] for c in cases] == ["ok", "ok", "ok"]


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--platform", "rocm"), "--platform wants tpu or cuda"),
        (("--platform", "cuda", "--chip", "v5e"), "not a chip of --platform cuda"),
        (("--platform", "tpu", "--chip", "h200"), "not a chip of --platform tpu"),
        (("--platform", "cuda", "--chip", "a100"), "unknown chip(s) a100"),
    ],
)
def test_a_wrong_platform_or_chip_is_a_one_line_usage_error(tmp_path, flags, says):
    write_project(tmp_path, ["kernels.matmul"])
    done = run_cli("lower", *flags, cwd=tmp_path)
    assert done.returncode == ExitCode.USAGE
    assert done.stderr.strip().count("\n") == 0
    assert says in done.stderr
    assert "Traceback" not in done.stderr


def test_the_gpu_seam_answers_jax_chip_queries_as_each_gpu():
    """What jax's GPU code asks while tracing, answered per GPU with nothing patched."""
    from jax.experimental.mosaic.gpu import core as mosaic_gpu
    from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu

    from ci_bench.measure.model.asgpu import as_gpu

    with as_gpu("h200"):
        assert mosaic_gpu._infer_arch() == (9, 0)
        assert hopper_matmul_mgpu.get_num_sms() == 132
    with as_gpu("b200"):
        assert mosaic_gpu._infer_arch() == (10, 0)
        assert hopper_matmul_mgpu.get_num_sms() == 148


def test_jax_device_kinds_map_to_the_table():
    assert gpu_for_device_kind("NVIDIA H100 80GB HBM3") == "h100"
    assert gpu_for_device_kind("NVIDIA H200") == "h200"
    assert gpu_for_device_kind("NVIDIA B200") == "b200"
    assert gpu_for_device_kind("NVIDIA H100 PCIe") is None  # other figures: not an H100 SXM
    assert gpu_for_device_kind("NVIDIA A100-SXM4-80GB") is None


def test_rules_are_named_from_jax_messages():
    rule, text = named(
        "ValueError: Mosaic GPU kernel exceeds available shared memory: "
        "smem_bytes=557064 > max_smem_bytes=232448"
    )
    assert rule == "shared_memory"
    assert text.startswith("shared memory: the kernel needs 557,064 B per block")
    assert "(324,616 B over)" in text
    assert named("ValueError: something else") == (None, "ValueError: something else")
    trace = '  File "x.py", line 75\n    assert cuda_versions is not None\nAssertionError'
    why = host_reason(trace)
    assert why is not None
    assert "CUDA plugin" in why
    assert host_reason("AssertionError") is None


def test_run_lower_cuda_on_a_cpu_lowers_as_a_gpu_and_runs_what_lowers(tmp_path):
    """``run --lower cuda`` on this CPU: no GPU to ask, so the table's first GPU answers
    (jax 0.11's Triton lowering refuses to guess); a kernel that breaks a rule is an error
    case, not measured: here every one does, so nothing is measured."""
    write_project(tmp_path, ["gpu_rule_breakers"])
    out = tmp_path / "run.json"
    done = run_cli(
        "run", "--lower", "cuda", "--repeats", "1", "--warmup", "0", "-o", str(out), cwd=tmp_path
    )
    assert done.returncode == ExitCode.NOTHING_MEASURED, done.stderr
    cases = {c["id"]: c for c in json.loads(out.read_text())["cases"]}
    assert cases["gpu_rule_breakers/KIND1/float32"]["status"] == "error"
    assert (
        "lowering for cuda as h100 failed: power-of-2 rule"
        in (cases["gpu_rule_breakers/KIND1/float32"]["error"])
    )
    assert [c["status"] for c in cases.values()] == ["error"] * 3
    assert all(c["pallas"] is None for c in cases.values())
