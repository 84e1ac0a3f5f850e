"""The platform table (ci_bench.schema.platforms): what measuring, lowering and ``init`` know of
cpu, tpu and gpu is read from one entry each, so supporting a platform is adding one."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ci_bench.errors import ExitCode
from ci_bench.measure.devices import toolchain
from ci_bench.measure.roofline import PEAKS, peak_for, peak_lookup
from ci_bench.measure.timers import default_timer
from ci_bench.measure.workers import default_workers, pin_env
from ci_bench.pipeline.adopt import constraints_files, constraints_template
from ci_bench.schema import platforms
from ci_bench.schema.platforms import PLATFORM, PLATFORM_NAMES, Driver, Platform
from ci_bench.store.files import dump_model
from tests.conftest import run_cli
from tests.harness.factories import CPU, case, results

H100 = CPU.model_copy(update={"platform": "gpu", "device_kind": "NVIDIA H100 80GB HBM3"})
NVIDIA_VERSION = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {v}  Tue Mar  5 22:14:07 UTC 2024\n"
    "GCC version:  gcc version 12.3.0\n"
)


def test_the_table_names_cpu_tpu_and_gpu() -> None:
    assert PLATFORM_NAMES == ("cpu", "tpu", "gpu")
    assert platforms.LOWER_ROLE_TARGET == "tpu"


def test_worker_environments_come_from_the_table() -> None:
    assert pin_env("cpu", 3) == {}
    assert pin_env("gpu", 2) == {"CUDA_VISIBLE_DEVICES": "2"}
    assert pin_env("tpu", 1) == {
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_BOUNDS": "1,1,1",
        "TPU_VISIBLE_CHIPS": "1",
        "TPU_VISIBLE_DEVICES": "1",
        "TPU_PROCESS_PORT": "8477",
        "TPU_MESH_CONTROLLER_ADDRESS": "localhost:8477",
        "TPU_MESH_CONTROLLER_PORT": "8477",
    }
    four = H100.model_copy(update={"device_count": 4})
    assert default_workers(four) == 4
    assert default_workers(CPU.model_copy(update={"device_count": 4})) == 1


def fake_packages(installed: dict[str, str]):
    return installed.get


def test_the_gpu_toolchain_holds_the_cuda_plugin_and_the_driver() -> None:
    installed = {"jax-cuda12-plugin": "0.7.2", "jax-cuda12-pjrt": "0.7.2", "libtpu": "0.0.1"}
    found = toolchain(
        PLATFORM["gpu"],
        version=fake_packages(installed),
        read={"/proc/driver/nvidia/version": NVIDIA_VERSION.format(v="550.54.15")}.get,
    )
    assert found == {
        "jax-cuda12-plugin": "0.7.2",
        "jax-cuda12-pjrt": "0.7.2",
        "nvidia-driver": "550.54.15",
    }
    # TPU: libtpu, or the nightly under libtpu's name; no driver file read.
    nightly = toolchain(PLATFORM["tpu"], version=fake_packages({"libtpu-nightly": "0.1.dev"}))
    assert nightly == {"libtpu": "0.1.dev"}
    assert toolchain(PLATFORM["cpu"], version=fake_packages(installed)) == {}
    # An unreadable driver file is left out, never guessed.
    assert toolchain(PLATFORM["gpu"], version=fake_packages({}), read=lambda _: None) == {}


@pytest.mark.parametrize(
    ("what", "new"),
    [("nvidia-driver", "560.28.03"), ("jax-cuda12-plugin", "0.7.3")],
)
def test_a_driver_or_plugin_bump_reads_as_toolchain_not_regression(
    tmp_path, project, what, new
) -> None:
    """A GPU baseline, then the same kernel 5x slower after a driver (or plugin) bump: the
    compare CLI says ``toolchain``, a warning, never a regression of the code."""
    old = {"jax-cuda12-plugin": "0.7.2", "nvidia-driver": "550.54.15"}
    before = H100.model_copy(update={"toolchain": old})
    after = H100.model_copy(update={"toolchain": {**old, what: new}})
    cid = "matmul/B1-M128-K128-N128/float32"
    base = tmp_path / "base.json"
    base.write_text(dump_model(results([case(cid, 1.0)], device=before)))
    folder = tmp_path / "b"
    done = run_cli("promote", str(base), "--baselines-dir", str(folder), cwd=project)
    assert done.returncode == 0, done.stderr
    current = tmp_path / "cur.json"
    current.write_text(dump_model(results([case(cid, 5.0)], device=after)))
    done = run_cli(
        "compare", str(current), "--baselines-dir", str(folder), "--format", "json", cwd=project
    )
    assert done.returncode == ExitCode.OK, done.stdout + done.stderr
    verdict = json.loads(done.stdout)["cases"][0]
    assert verdict["verdict"] == "toolchain"
    assert f"{what} {old[what]}" in verdict["reason"]


def test_a_fingerprint_without_a_toolchain_is_written_as_before() -> None:
    assert "toolchain" not in json.loads(CPU.model_dump_json())
    assert CPU.software == f"jax {CPU.jax} jaxlib {CPU.jaxlib}"
    gpu = H100.model_copy(update={"toolchain": {"nvidia-driver": "550"}})
    assert gpu.software.endswith(" nvidia-driver 550")
    assert type(gpu).model_validate_json(gpu.model_dump_json()) == gpu


def test_peaks_come_from_the_platforms_source() -> None:
    assert peak_for("NVIDIA H100 80GB HBM3", "gpu") is PEAKS["h100-sxm"]
    assert peak_for("NVIDIA H100 80GB HBM3", "cpu") is None
    assert peak_for("NVIDIA H100 80GB HBM3", "tpu") is None  # jax's TPU table has no GPU
    assert peak_lookup("NVIDIA H100 80GB HBM3", "gpu")("bfloat16") == (989.4, 3350.0)
    tflops, gbps = peak_lookup("TPU v5 lite", "tpu")("bfloat16")
    assert tflops
    assert gbps


TPU_CONSTRAINTS = (
    "# The TPU toolchain every benchmark, A/B and promotion job installs (pip install -c).\n"
    "# A jax, jaxlib or libtpu release changes compiled code and so timings: bump the three\n"
    "# together, in a reviewed change (jax's metadata names libtpu for its tpu extra).\n"
    "jax==0.7.2\njaxlib==0.7.2\n{pin}\n"
)


def test_the_tpu_constraints_file_is_unchanged_and_gpu_has_its_own() -> None:
    pinned = constraints_files("0.7.2", "0.7.2", {"libtpu": "0.0.21"})
    assert pinned == {"constraints/tpu.txt": TPU_CONSTRAINTS.format(pin="libtpu==0.0.21")}
    unpinned = constraints_template("0.7.2", "0.7.2", None)
    assert unpinned == TPU_CONSTRAINTS.format(pin="# libtpu==<the version jax's tpu extra names>")
    gpu = constraints_files("0.7.2", "0.7.2", {"jax-cuda12-plugin": "0.7.2"}, ("gpu",))
    text = gpu["constraints/gpu.txt"]
    assert "jax-cuda12-plugin==0.7.2\n" in text
    assert "# jax-cuda12-pjrt==<the version jax's cuda12 extra names>\n" in text
    assert "NVIDIA driver" in text


def test_adding_a_platform_entry_is_what_supporting_it_takes(monkeypatch) -> None:
    """A made-up platform, one entry: workers, timer, toolchain, peaks and ``init``'s
    constraints all follow it, with no other change."""
    npu = Platform(
        "npu",
        default_timer="profiler",
        worker_env=(("NPU_VISIBLE", "{index}"), ("NPU_PORT", "{port}")),
        port_base=9000,
        one_worker_per_device=True,
        toolchain=(("npu-runtime",),),
        driver=Driver("npu-driver", "/sys/npu/version", r"v(\S+)"),
        peaks="vendor-table",
        extra="npu",
        constraints_header="# NPU\n",
    )
    monkeypatch.setitem(platforms.PLATFORM, "npu", npu)
    monkeypatch.setattr(platforms, "PLATFORMS", (*platforms.PLATFORMS, npu))
    assert pin_env("npu", 2) == {"NPU_VISIBLE": "2", "NPU_PORT": "9002"}
    assert default_timer("npu") == "profiler"
    device = CPU.model_copy(update={"platform": "npu", "device_kind": "H100", "device_count": 8})
    assert default_workers(device) == 8
    found = toolchain(npu, version={"npu-runtime": "3.1"}.get, read={"/sys/npu/version": "v7"}.get)
    assert found == {"npu-runtime": "3.1", "npu-driver": "7"}
    assert peak_for("H100", "npu") is PEAKS["h100-sxm"]
    text = constraints_files("1", "2", {}, ("npu",))["constraints/npu.txt"]
    assert text == "# NPU\njax==1\njaxlib==2\n# npu-runtime==<the version jax's npu extra names>\n"
    # Without an entry, a platform is a CPU-like host: one worker, no peaks, nothing pinned.
    assert dataclasses.replace(platforms.platform_of("xpu"), name="cpu") == PLATFORM["cpu"]


def test_the_reusable_workflows_install_the_tpu_entrys_jax() -> None:
    """The workflows' default install (a public input, spelled in YAML) is the tpu entry's."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / ".github" / "workflows"
    for name in ("ci-bench.yml", "ci-bench-release.yml"):
        text = (root / name).read_text()
        assert f"default: -e . {PLATFORM['tpu'].install}\n" in text, name


def test_the_lowering_names_are_the_tables_and_the_files_type() -> None:
    """``lower --platform``, ``run --lower`` and the lowering file's ``platform`` are the
    platform table's lowering names, one list (issue 40: they were typed in five places)."""
    from typing import get_args

    from ci_bench.schema.lowering import LoweringPlatform
    from ci_bench.schema.platforms import LOWERING_NAMES

    assert LOWERING_NAMES == ("tpu", "cuda")
    assert set(get_args(LoweringPlatform)) == set(LOWERING_NAMES)


def test_device_time_is_the_default_where_the_platform_has_it_the_wall_clock_elsewhere():
    """Issue 50: on a TPU the wall clock is mostly the host's round trip (0.55-0.63 ms a
    call on a v5e against 1-75 µs of chip time), so the profiler timer is its default."""
    assert default_timer("tpu") == "profiler"
    assert default_timer("cpu") == "wallclock"
    assert default_timer("gpu") == "wallclock"
