"""What issue 18's reader reproductions share: two case ids, a results file, a history line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci_bench.store.files import dump_model
from tests.harness.factories import case, results
from tests.harness.inproc import call

ID = "matmul/B1-M128-K128-N128/float32"
ID4 = "matmul/B4-M128-K256-N128/float32"


@pytest.fixture
def results_file(tmp_path: Path) -> Path:
    path = tmp_path / "r.json"
    path.write_text(dump_model(results([case(ID), case(ID4)])))
    return path


def history_line(results_path: Path, folder: Path) -> Path:
    """A real history store: ``record`` of a results file."""
    outcome = call("record", str(results_path), "--history", str(folder), cwd=folder.parent)
    assert outcome.code == 0, outcome.err
    (path,) = folder.glob("*.jsonl")
    return path


def edited(path: Path, edit) -> Path:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    return path
