"""benchmarks/tpu_vmem_probe.py: reading Mosaic's refusals and raising the limit to its need.

The chip is not here: the compiler is replaced by a function that allocates the way Mosaic
was seen to on a TPU v5e (the pipeline's buffers, then its own copies, each refusal naming
the running total that passed the limit, in its own words), and the probe must find the
total, not the first figure named.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import tpu_vmem_probe as probe_module  # noqa: E402

MIB = 1 << 20
# A refusal as the chip printed it (benchmarks/data/tpu_v5e_kernels_2026-12-06d.txt), trimmed.
REFUSAL = (
    "RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom: Ran out of memory in memory space "
    "vmem while allocating on stack for %matmul_tiled.1 = bf16[1,2048,2048]{2,1,0:T(8,128)"
    "(2,1)} custom-call(...). Scoped allocation with size {size} and limit {limit} exceeded "
    "scoped vmem limit by 1016.0K. It should not be possible to run out of scoped vmem"
)


@pytest.mark.parametrize(
    ("size", "expected"),
    [("16.99M", round(16.99 * MIB)), ("1016.0K", 1016 * 1024), ("2.00M", 2 * MIB)],
)
def test_the_need_is_read_from_the_refusal(size, expected):
    message = REFUSAL.replace("{size}", size).replace("{limit}", "16.00M")
    assert probe_module.needed_bytes(message) == expected


def test_a_refusal_for_another_reason_names_no_need():
    assert probe_module.needed_bytes("INTERNAL: Mosaic failed to compile TPU kernel") is None


def _staged_compiler(stages_mib: list[float]):
    """Mosaic as seen on the chip: allocations in turns, the running totals ``stages_mib``;
    a limit below a total refuses, naming that total."""

    def compiles(fn, shapes, limit):
        for total in stages_mib:
            if total * MIB > limit:
                return REFUSAL.replace("{size}", f"{total:.2f}M").replace("{limit}", "x")
        return None

    return compiles


def test_the_probe_raises_the_limit_past_each_figure_named_until_it_compiles(monkeypatch):
    monkeypatch.setattr(probe_module, "compile_message", _staged_compiler([2.0, 13.0, 16.99]))
    row = probe_module.probe(2048, "bfloat16", (2048, 1024, 256), 1 / 16)
    assert row["named_mib"] == [2.0, 13.0, 16.99]
    assert row["needs_mib"] == 16.99
    assert row["fits_16mib"] is False
    assert row["refused_below"] is True


def test_a_tiling_that_fits_the_default_is_probed_from_below_too(monkeypatch):
    monkeypatch.setattr(probe_module, "compile_message", _staged_compiler([11.0, 15.48]))
    row = probe_module.probe(2048, "bfloat16", (1024, 2048, 256), 1 / 16)
    assert row["fits_16mib"] is True
    assert row["needs_mib"] == 15.48
    assert row["refused_below"] is True


def test_a_refusal_for_another_reason_stops_the_search_and_keeps_its_words():
    def compiles_at(limit):
        return "INTERNAL: Mosaic failed to compile TPU kernel: unsupported shape"

    row = probe_module.search_need(compiles_at, 1 / 16)
    assert row["needs_mib"] is None
    assert "unsupported shape" in row["message"]
    assert "refused_below" not in row


def _probe_file(tmp_path: Path, name: str, rows: list[dict]) -> Path:
    import json

    path = tmp_path / name
    path.write_text(json.dumps({"rows": rows}))
    return path


def test_two_probes_that_agree_on_every_figure_say_so(tmp_path, capsys):
    from tpu_vmem_probe_report import agreement

    row = {"size": 4096, "dtype": "bfloat16", "tiles": [1024, 1024, 1024], "fits_16mib": False,
           "named_mib": [16.0, 18.36], "needs_mib": 18.36, "refused_below": True}  # fmt: skip
    chip = _probe_file(tmp_path, "chip.json", [row])
    deviceless = _probe_file(tmp_path, "deviceless.json", [row, {**row, "tiles": [256] * 3}])
    assert agreement(deviceless, chip) == 0
    assert "1/1 tilings probed in both agree" in capsys.readouterr().out


def test_a_probe_that_names_another_figure_disagrees(tmp_path, capsys):
    from tpu_vmem_probe_report import agreement

    row = {"size": 2048, "dtype": "float32", "tiles": [512, 512, 512], "fits_16mib": True,
           "named_mib": [4.0, 6.34], "needs_mib": 6.34, "refused_below": True}  # fmt: skip
    chip = _probe_file(tmp_path, "chip.json", [row])
    other = _probe_file(
        tmp_path, "other.json", [{**row, "named_mib": [4.0, 6.5], "needs_mib": 6.5}]
    )
    assert agreement(other, chip) == 1
    assert "0/1 tilings probed in both agree" in capsys.readouterr().out


def test_a_probe_is_held_to_the_chips_sweep_program_by_program(tmp_path, capsys):
    import json

    from tpu_vmem_probe_report import agreement

    rows = [
        {"size": 1024, "dtype": "bfloat16", "tiles": [2048, 1024, 1024], "fits_16mib": True},
        {"size": 4096, "dtype": "float32", "tiles": [2048, 2048, 2048], "fits_16mib": False},
    ]
    probe = _probe_file(tmp_path, "probe.json", rows)
    sweep = tmp_path / "sweep.json"
    programs = [{"program": [1024, 1024, 1024], "compiles": True}]  # 2048 clipped to 1024
    other = [{"program": [2048, 2048, 2048], "compiles": True}]  # the chip compiled it
    sweep.write_text(json.dumps({"sweeps": [
        {"size": 1024, "dtype": "bfloat16", "programs": programs},
        {"size": 4096, "dtype": "float32", "programs": other},
    ]}))  # fmt: skip
    assert agreement(probe, sweep) == 1
    out = capsys.readouterr().out
    assert "1/2 programs compiled in both agree" in out
    assert "(4096, 'float32', (2048, 2048, 2048)) probe: False sweep: True" in out
