"""Buffer-assignment parsing on real XLA dumps (fixtures), and one real dump in a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

from ci_bench.measure.hlo import (
    dump_case_hlo,
    format_peak_table,
    human_bytes,
    load_buffer_assignment,
    parse_buffer_assignment,
    xla_dump_flags,
)
from ci_bench.measure.profiling import ProfilingError

HLO = Path(__file__).parent / "fixtures" / "hlo"
REPO = Path(__file__).resolve().parents[1]
UNALIGNED = HLO / "matmul-B1-M127-K513-N255-bfloat16.cpu_after_optimizations-buffer-assignment.txt"
ALIGNED = HLO / "matmul-B1-M128-K128-N128-float32.cpu_after_optimizations-buffer-assignment.txt"


def test_unaligned_matmul_totals_by_allocation_kind() -> None:
    ba = load_buffer_assignment(UNALIGNED)
    assert ba.total_bytes == 1210904  # "Total bytes used" from the -values file
    assert ba.bytes_of("parameter") == 127 * 513 * 2 + 513 * 255 * 2
    assert ba.bytes_of("output") == 127 * 255 * 2
    assert ba.bytes_of("temp") == 754180  # what compiled.memory_analysis() calls temp_size
    assert ba.bytes_of("constant") == 22
    assert sum(a.size for a in ba.allocations) == ba.total_bytes
    assert ba.peak_live_bytes == 1178392  # the live-range file's "(peak)" set


def test_largest_temporaries_are_the_padded_operands_sorted_by_size() -> None:
    ba = load_buffer_assignment(UNALIGNED)
    sizes = [b.size for b in ba.temporaries]
    assert sizes == sorted(sizes, reverse=True)
    first, second = ba.temporaries[:2]
    # K=513 padded to 640 and N=255 to 256: b becomes [1,640,256], a becomes [1,128,640].
    assert (first.size, first.shape) == (640 * 256 * 2, "bf16[1,640,256]")
    assert (second.size, second.shape) == (128 * 640 * 2, "bf16[1,128,640]")
    assert "pad_convert_fusion" in first.aliases  # the pad shares the slice; phis are dropped
    assert not any(a.endswith("(phi)") for b in ba.temporaries for a in b.aliases)
    assert len({(b.allocation, b.offset, b.size) for b in ba.temporaries}) == len(ba.temporaries)


def test_aligned_matmul_has_no_temporaries() -> None:
    ba = load_buffer_assignment(ALIGNED)
    assert ba.total_bytes == 3 * 128 * 128 * 4
    assert ba.temporaries == ()
    assert [a.kind for a in ba.allocations] == ["output", "parameter", "parameter"]
    assert ba.allocations[0].shape == "f32[128,128]"
    assert "no temporary buffers" in format_peak_table(ba)


def test_buffer_assignment_file_alone_sums_allocations_and_has_no_peak() -> None:
    ba = parse_buffer_assignment(UNALIGNED.read_text())
    assert ba.total_bytes == 1210904
    assert ba.peak_live_bytes is None
    assert ba.temporaries[0].shape == "bf16[1,640,256]"


def test_text_without_allocations_is_a_one_line_error() -> None:
    with pytest.raises(ProfilingError, match="not an XLA buffer assignment"):
        parse_buffer_assignment("HloModule jit_f\n\nENTRY main { ROOT p = f32[] parameter(0) }")


def test_peak_table_is_human_readable_and_capped() -> None:
    table = format_peak_table(load_buffer_assignment(UNALIGNED), top=3)
    lines = table.splitlines()
    assert lines[0].startswith("total allocation 1.2 MiB: temporaries 736.5 KiB")
    assert lines[1] == "peak live 1.1 MiB (heap simulation)"
    assert "temporary buffer" in table
    assert "320.0 KiB" in table
    assert "bf16[1,640,256]" in table
    assert len([line for line in lines if line.lstrip()[:2] in ("1 ", "2 ", "3 ", "4 ")]) == 3


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (754180, "736.5 KiB"),
        (3 * 2**30, "3.0 GiB"),
        (5 * 2**40, "5120.0 GiB"),
    ],
)
def test_human_bytes(n: int, text: str) -> None:
    assert human_bytes(n) == text


def test_dump_flags_replace_the_users_dump_flags_and_keep_the_rest(tmp_path: Path) -> None:
    user = "--xla_force_host_platform_device_count=4 --xla_dump_to=/elsewhere"
    flags = xla_dump_flags(tmp_path, user).split()
    assert flags[0] == "--xla_force_host_platform_device_count=4"
    assert f"--xla_dump_to={tmp_path}" in flags
    assert "--xla_dump_to=/elsewhere" not in flags
    assert "--xla_dump_hlo_as_text" in flags


def test_dump_case_hlo_writes_and_parses_a_real_buffer_assignment(tmp_path: Path) -> None:
    case_id = "matmul/B1-M128-K128-N128/float32"
    info = dump_case_hlo("kernels.matmul", case_id, tmp_path / "dump", root=REPO)
    assert info.buffer_assignment_file.is_file()
    assert info.buffer_assignment_file.parent == (tmp_path / "dump").resolve()
    assert "jit_ci_bench_matmul" in info.buffer_assignment_file.name
    assert info.buffer_assignment_file.name.endswith("buffer-assignment.txt")
    assert info.hlo_file is not None
    assert "HloModule jit_ci_bench_matmul" in info.hlo_file.read_text()
    f32 = 128 * 128 * 4
    assert info.assignment.bytes_of("parameter") == 2 * f32
    assert info.memory["argument"] == 2 * f32
    assert info.memory["output"] == info.assignment.bytes_of("output") == f32
    assert info.memory["temp"] == info.assignment.bytes_of("temp")
    # Only the kernel's module is dumped, not the input generation's.
    assert not list(info.out_dir.glob("*threefry*buffer-assignment.txt"))
    assert case_id in info.describe()


def test_dump_of_an_unknown_case_fails_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ProfilingError) as err:
        dump_case_hlo("kernels.matmul", "matmul/B1-X5/float32", tmp_path, root=REPO)
    message = str(err.value)
    assert "\n" not in message
    assert "takes parameters" in message
