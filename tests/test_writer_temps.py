"""A writer killed mid-write (``promote``, ``tune --write``, ``record``) leaves a temporary
file beside its target; the next write of that target removes it, and never a live
writer's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ci_bench.store.writer import write_text


def _dead_pid() -> int:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(done.stdout)


@pytest.mark.parametrize(
    "name", ["matmul_v0.1.0.json", "flash_attention_v0.12.3.tuned.v5e.json"], ids=["short", "long"]
)
def test_the_next_write_removes_a_dead_writers_temp_and_keeps_a_live_ones(
    tmp_path: Path, name: str
) -> None:
    target = tmp_path / name
    write_text(target, "old\n", what="baseline")
    dead = tmp_path / f".{name[:32]}.{_dead_pid()}-0123456789ab.tmp"
    live = tmp_path / f".{name[:32]}.{os.getpid()}-ba9876543210.tmp"
    dead.write_text("half a baseline")
    live.write_text("being written")
    write_text(target, "new\n", what="baseline", replace=True)
    assert target.read_text() == "new\n"
    assert not dead.exists()
    assert live.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, live.name])
