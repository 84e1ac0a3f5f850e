"""Chips come from jax's own table; what it lacks is a small cited table; the two-core rule."""

from __future__ import annotations

import pytest
from jax._src.pallas.mosaic.tpu_info import chip_version_from_device_kind, get_tpu_info_for_chip
from jax.experimental.pallas import tpu as pltpu

from ci_bench.judge.model import target_chips
from ci_bench.measure.model.chips import (
    CHIP_NAMES,
    DEFAULT_SCOPED_VMEM,
    MEGACORE,
    UnknownChipError,
    chip,
    chip_for_device_kind,
)
from ci_bench.schema.model import TPU_DEVICE_KINDS

MIB = 1024 * 1024


@pytest.mark.parametrize("name", CHIP_NAMES)
def test_every_figure_jax_has_is_read_from_jax(name):
    found = chip(name)
    cores = 2 if name in MEGACORE else 1
    info = get_tpu_info_for_chip(pltpu.ChipVersion(name), cores)
    assert found.tensor_cores == cores
    assert found.vmem_capacity_bytes == info.vmem_capacity_bytes
    assert found.smem_capacity_bytes == info.smem_capacity_bytes
    assert found.hbm_bytes_per_s == info.mem_bw_bytes_per_second
    assert found.bf16_flops_per_s == info.bf16_ops_per_second
    # The chip peak is per-TensorCore x cores: v5p's 459 TFLOPS is two 229.5 ones.
    assert found.chip_tflops == pytest.approx(info.bf16_ops_per_second * cores / 1e12)


def test_v5e_hbm_time_is_charged_at_the_bandwidth_the_chip_measured_the_roofline_keeps_jaxs():
    """Revision 6: a streaming copy measured 656.6 GB/s on a TPU v5e (the microbenchmark's
    data file); the model charges that, MFU/HBM % keep jax's figure; other chips are unmoved."""
    import json

    from tests.conftest import REPO

    data = REPO / "benchmarks" / "data" / "tpu_v5e_microbench_2026-12-06.json"
    (copy,) = [r for r in json.loads(data.read_text())["rows"] if r["bench"] == "hbm"]
    v5e = chip("v5e")
    assert v5e.model_hbm_bytes_per_s == pytest.approx(copy["gb_s"] * 1e9)
    assert v5e.chip_gbps == pytest.approx(v5e.hbm_bytes_per_s / 1e9)
    assert v5e.chip_gbps > copy["gb_s"]  # the roofline's HBM % stays against jax's 820 GB/s
    assert chip("v6e").model_hbm_bytes_per_s == chip("v6e").hbm_bytes_per_s


def test_the_scoped_vmem_defaults_are_the_cited_ones():
    assert {c: DEFAULT_SCOPED_VMEM[c] // MIB for c in CHIP_NAMES} == {
        "v4i": 16,
        "v4": 16,
        "v5e": 16,
        "v5p": 16,
        "v6e": 32,
        "7": 32,
        "7x": 32,
        "8i": 32,
    }
    # Only libtpu's own error messages are solid sources (v5e, v6e); elsewhere past the
    # default is a warning (7x: contradicted by measured runs at 32.5-35.5 MiB).
    assert [c for c in CHIP_NAMES if chip(c).scoped_vmem_solid] == ["v5e", "v6e"]
    # A scoped default is never above the physical VMEM of a core.
    assert all(chip(c).scoped_vmem_bytes <= chip(c).vmem_capacity_bytes for c in CHIP_NAMES)


def test_unknown_chips_are_refused_by_name():
    with pytest.raises(UnknownChipError, match="unknown TPU chip 'v9'; known: v4i, v4, v5e"):
        chip("v9")


def test_the_pure_device_kind_table_agrees_with_jax():
    for kind, name in TPU_DEVICE_KINDS.items():
        assert str(chip_version_from_device_kind(kind)) == name
        assert chip_for_device_kind(kind) == name
    assert chip_for_device_kind("cpu") is None


def test_target_chips_config_then_the_runners_tpu_then_every_chip():
    every = list(CHIP_NAMES)
    assert target_chips(["v6e"], "TPU v5 lite", every) == ["v6e"]
    assert target_chips([], "TPU v5 lite", every) == ["v5e"]
    assert target_chips([], "cpu", every) == every
    assert target_chips([], None, every) == every


def test_config_target_chips_take_every_chip_the_model_knows_and_refuse_others(tmp_path):
    """An 8i (or 7, v4i) runner can name its chip in [tool.ci-bench]: the config's list is
    the model's, not an older copy of it; an unknown chip is one line naming the key."""
    from ci_bench.errors import InputError
    from ci_bench.measure.model.chips import CHIP_NAMES as MODEL_CHIPS
    from ci_bench.pipeline.config import load_config

    pyproject = tmp_path / "pyproject.toml"
    names = ", ".join(f'"{c}"' for c in MODEL_CHIPS)
    pyproject.write_text(f"[tool.ci-bench]\ntarget-chips = [{names}]\n", encoding="utf-8")
    assert tuple(load_config(pyproject, tmp_path).target_chips) == MODEL_CHIPS
    assert {"8i", "7", "v4i"} <= set(MODEL_CHIPS)

    pyproject.write_text('[tool.ci-bench]\ntarget-chips = ["v9"]\n', encoding="utf-8")
    with pytest.raises(InputError, match="target-chips") as refused:
        load_config(pyproject, tmp_path)
    assert "\n" not in str(refused.value)
