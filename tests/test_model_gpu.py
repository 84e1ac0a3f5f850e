"""The GPU cost model (``analyze --chip h200``): grid programs in waves over the SMs, HBM
traffic from the block specs (a block read by several programs of one wave fetched once),
tensor-core FLOPs at the operands' dense peak, and ``partial`` where non-matmul work is
significant."""

from __future__ import annotations

import json

from ci_bench.contract.spec import Case
from ci_bench.measure.model import analyze_case
from ci_bench.measure.model.gpuwaves import launch_order, occupancy
from ci_bench.schema.gpus import GPUS
from kernels.matmul import SPEC as MATMUL
from tests.conftest import run_cli, write_project

MIB = 1024 * 1024


def test_a_1024_cube_bf16_matmul_is_one_wave_reading_each_array_once():
    """64 programs of 128 x 128 output tiles fit one wave of 132 SMs: every A and B panel
    is fetched once, so the bytes are the arrays' own; the time is the busiest SM's one
    program at its share of the dense bf16 peak (989.4 TFLOPS / 132 SMs)."""
    case = Case("matmul", {"B": 1, "M": 1024, "K": 1024, "N": 1024}, "bfloat16")
    model = analyze_case(MATMUL, case, ["h200"])
    assert model.status == "ok", model.reason
    chip = model.chips["h200"]
    assert chip.gpu is not None
    assert (chip.gpu.backend, chip.gpu.programs, chip.gpu.waves) == ("triton", 64, 1)
    assert chip.hbm_bytes == 3 * 1024 * 1024 * 2
    assert model.flops == 2 * 1024**3
    per_program = 2 * 128 * 128 * 1024
    assert abs(chip.compute_us - per_program / (989.4e12 / 132) * 1e6) < 1e-6
    assert abs(chip.memory_us - 6 * MIB / 4.8e12 * 1e6) < 1e-6
    assert chip.bound == "compute"
    assert chip.modelled_us == chip.compute_us
    # Triton's pipeline: 3 stages of a [128, 64] and a [64, 128] bf16 tile.
    assert chip.vmem_bytes == 3 * (128 * 64 + 64 * 128) * 2
    assert chip.fits


def test_a_grid_past_one_wave_rereads_the_shared_panels_once_per_wave():
    case = Case("matmul", {"B": 1, "M": 4096, "K": 4096, "N": 4096}, "bfloat16")
    model = analyze_case(MATMUL, case, ["h100"])
    chip = model.chips["h100"]
    assert chip.gpu is not None
    assert chip.gpu.programs == 1024
    assert chip.gpu.occupancy == 2  # 228 KB per SM over 96 KB per program
    assert chip.gpu.waves == 4  # 1024 programs over 132 x 2
    ideal = 3 * 4096 * 4096 * 2
    every_program_alone = 1024 * (2 * 128 * 4096 * 2) + 4096 * 4096 * 2
    assert ideal < chip.hbm_bytes < every_program_alone
    # 1024 programs on 132 SMs: the busiest runs 8, a partial last round included.
    assert abs(chip.compute_us - 8 * 2 * 128 * 128 * 4096 / (989.4e12 / 132) * 1e6) < 1e-6


def test_float32_dots_run_at_tf32_and_b200_is_faster():
    case = Case("matmul", {"B": 1, "M": 1024, "K": 1024, "N": 1024}, "float32")
    model = analyze_case(MATMUL, case, ["h100", "b200"])
    h100, b200 = model.chips["h100"], model.chips["b200"]
    assert abs(h100.compute_us - 2 * 128 * 128 * 1024 / (494.7e12 / 132) * 1e6) < 1e-6
    assert b200.modelled_us < h100.modelled_us


def test_significant_non_matmul_work_makes_the_gpu_model_partial(tmp_path):
    write_project(tmp_path, ["kernels.matmul", "kernels.gla"])
    done = run_cli(
        "analyze", "--chip", "h200", "--profile", "smoke", "--format", "json", "-q", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["meta"]["chips"] == ["h200"]
    by_id = {c["id"]: c for c in doc["cases"]}
    matmul = by_id["matmul/B1-M128-K128-N128/bfloat16"]
    assert matmul["status"] == "ok"
    assert matmul["chips"]["h200"]["gpu"]["backend"] == "triton"
    gla = by_id["gla/B1-T256-H2-K64-V64/bfloat16"]
    assert gla["status"] == "partial"
    assert "non-matmul work in the body" in gla["reason"]
    # GLA's Triton body: its costliest dot's tiles (a lower bound) fit a block's 227 KB.
    assert 0 < gla["chips"]["h200"]["vmem_bytes"] <= 227 * 1024
    assert gla["chips"]["h200"]["vmem_warning"] is None
    assert doc["verdict"] == "partial"


def test_launch_order_is_grid_dimension_zero_fastest():
    assert list(launch_order((2, 3))) == [0, 3, 1, 4, 2, 5]


def test_occupancy_is_limited_by_shared_memory_warps_and_block_slots():
    h100 = GPUS["h100"]
    assert occupancy(h100, 96 * 1024, 4) == 2
    assert occupancy(h100, 0, 4) == 16  # 64 warps per SM, 4 per program
    assert occupancy(h100, 0, 1) == 32  # 32 resident blocks per SM
    assert occupancy(h100, 300 * 1024, 4) == 1


def test_a_time_under_the_gpus_tensor_core_floor_is_an_error_and_hbm_is_not_its_floor():
    """On a GPU runner the floor guard reads the runner's GPU entry: its tensor-core time
    (a true floor); its modelled HBM time is not one (L2 serves repeated calls)."""
    from ci_bench.judge.model import floor_error, runner_chip

    assert runner_chip("NVIDIA H200") == "h200"
    assert runner_chip("TPU v5 lite") == "v5e"
    assert runner_chip("cpu") is None
    case = Case("matmul", {"B": 1, "M": 1024, "K": 1024, "N": 1024}, "bfloat16")
    model = analyze_case(MATMUL, case, ["h200"])
    chip = model.chips["h200"]
    floor_ms = chip.compute_us / 1000
    too_fast = floor_error(model, floor_ms * 0.4, "h200")
    assert too_fast is not None
    assert "faster than the chip allows" in too_fast
    assert "on h200" in too_fast
    assert floor_error(model, floor_ms * 0.6, "h200") is None
    # A memory-bound GPU entry: far under its modelled HBM time, over its tensor-core time.
    slow_memory = chip.model_copy(update={"memory_us": 100 * chip.compute_us})
    bound = model.model_copy(update={"chips": {"h200": slow_memory}})
    assert floor_error(bound, floor_ms * 0.6, "h200") is None
    # The same figures on a TPU entry (no ``gpu``): its HBM time is a floor there.
    tpu_like = slow_memory.model_copy(update={"gpu": None})
    as_tpu = model.model_copy(update={"chips": {"h200": tpu_like}})
    assert floor_error(as_tpu, floor_ms * 0.6, "h200") is not None
