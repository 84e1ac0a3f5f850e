"""What ran beside the Pallas kernels in a traced program (``ci-bench profile``): the
recorded v5e traces (tests/fixtures/tpu_v5e), whose program is its kernel alone, and the same
trace with the three copies XLA puts around the project's matmul at 4 x 513³ float32 added
as the chip names them (benchmarks/tpu_matmul_layouts.py found them; the recorded program
had none)."""

from __future__ import annotations

import json
import re

import pytest
from jax.profiler import ProfileData

from ci_bench.measure.unit_metrics import read_outside
from ci_bench.report.unit_metrics import outside_line
from tests.conftest import run_cli
from tests.test_unit_metrics import CHIP, recorded

COPIES = (  # (offset, duration) in ps after the kernel, and XLA's own instruction text
    (
        1_000_000,
        3_000_000,
        "%copy = f32[4,513,513]{2,1,0:T(8,128)} copy(f32[4,513,513]{2,0,1:T(4,128)} %a.1)",
    ),
    (
        4_000_000,
        3_000_000,
        "%copy.1 = f32[4,513,513]{2,1,0:T(8,128)} copy(f32[4,513,513]{2,0,1:T(4,128)} %b.1)",
    ),
    (
        7_000_000,
        2_500_000,
        "%copy.2 = f32[4,513,513]{2,0,1:T(4,128)} copy(f32[4,513,513]{2,1,0:T(8,128)} %m.1)",
    ),
)


SPAN = 9_500_000  # ps: the copies' span after the kernel


def _first_duration(text: str, line: str) -> tuple[int, int]:
    """Where the first event of a trace line states its duration, and that duration (ps)."""
    found = re.compile(r"duration_ps: (\d+)").search(text, text.index(f'name: "{line}"'))
    assert found is not None
    return found.start(1), int(found.group(1))


def with_copies(text: str) -> str:
    """The recorded trace with COPIES on its XLA Ops line, after the kernel, and the
    program's event on XLA Modules lengthened by their span to hold them."""
    _, kernel_ps = _first_duration(text, "XLA Ops")
    ops = text.index('name: "XLA Ops"')
    at = text.index("\n", text.index("events {", ops))
    added = "".join(
        f"\n    events {{ metadata_id: {90 + i} offset_ps: {kernel_ps + offset} "
        f"duration_ps: {duration} }}"
        for i, (offset, duration, _) in enumerate(COPIES)
    )
    text = text[:at] + added + text[at:]
    start, module_ps = _first_duration(text, "XLA Modules")
    longer = str(module_ps + SPAN)
    text = text[:start] + longer + text[start + len(str(module_ps)) :]
    names = "".join(
        f"  event_metadata {{ key: {90 + i} value {{ id: {90 + i} name: {json.dumps(name)} }} }}\n"
        for i, (_, _, name) in enumerate(COPIES)
    )
    first = text.index("  event_metadata {")
    return text[:first] + names + text[first:]


def test_a_program_that_is_its_kernel_has_nothing_beside_it():
    outside = read_outside(ProfileData.from_text_proto(recorded("matmul-1024-t512")))
    assert outside is not None
    assert (outside.calls, outside.ops, outside.us) == (1, {}, 0)
    assert outside.program_us == pytest.approx(20.178)
    assert outside_line(outside).startswith("beside the Pallas kernels: nothing")


def test_copies_beside_the_kernel_are_counted_timed_and_read_as_layout_changes():
    outside = read_outside(ProfileData.from_text_proto(with_copies(recorded("matmul-1024-t512"))))
    assert outside is not None
    assert outside.calls == 1
    (kind,) = outside.ops
    count, us = outside.ops[kind]
    assert (kind, count) == ("copy", 3)
    assert us == pytest.approx(8.5)
    assert outside.program_us == pytest.approx(20.178 + 9.5)
    line = outside_line(outside)
    assert "8.5 µs a call of the program's 29.7" in line
    assert "copy x3 8.5 µs" in line
    assert "layout" in line


def test_no_pallas_kernel_on_a_tpu_gives_nothing_to_set_beside():
    text = recorded("matmul-1024-t512").replace("tpu_custom_call", "some_other_call")
    assert read_outside(ProfileData.from_text_proto(text)) is None


def test_profile_read_prints_and_writes_what_ran_beside_the_kernel(tmp_path, project):
    trace = tmp_path / "copies.xplane.pb"
    text = with_copies(recorded("matmul-1024-t512"))
    trace.write_bytes(ProfileData.text_proto_to_serialized_xspace(text))
    dumps = CHIP / "matmul-1024-t512.llo"
    done = run_cli("profile", "--read", str(trace), "--dumps", str(dumps), cwd=project)
    assert done.returncode == 0, done.stderr
    assert "beside the Pallas kernels: 8.5 µs a call of the program's 29.7" in done.stdout
    row = next(line for line in done.stdout.splitlines() if line.startswith("matmul_tiled.1"))
    assert row.split()[1] == "20.2"  # the kernel's own time: the copies are not in it
    as_json = run_cli(
        "profile", "--read", str(trace), "--dumps", str(dumps), "--format", "json", cwd=project
    )
    (profile,) = json.loads(as_json.stdout)["profiles"]
    assert profile["outside"]["ops"] == {"copy": {"per_call": 3.0, "us": 8.5}}
    assert profile["outside"]["us"] == pytest.approx(8.5)
