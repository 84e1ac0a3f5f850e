"""The fuzzer in CI: hostile results, baselines, configs, events and command lines.

Property-based (hypothesis), bounded to about a minute and derandomized, so a failure in
CI reproduces on any machine. The long, random run is benchmarks/fuzz.py.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzzing import TARGETS, attempt

# Examples per target: CI keeps the whole file near a minute; FUZZ_EXAMPLES raises it.
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "60"))
# Drawing a PNG takes a second: fewer plots.
SLOW = {"plot": max(1, EXAMPLES // 6)}


@pytest.mark.parametrize("target", list(TARGETS))
def test_hostile_inputs_keep_the_contract(target):
    strategy, _ = TARGETS[target]

    @settings(
        max_examples=SLOW.get(target, EXAMPLES),
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(strategy)
    def keeps_the_contract(value):
        failure = attempt(target, value)
        assert failure is None, failure

    keeps_the_contract()


@pytest.mark.parametrize(
    ("name", "data", "args"),
    [
        ("deep.json", b"[" * 200_000 + b"]" * 200_000, ["compare", "deep.json"]),
        ("inf.json", None, ["plot", "inf.json", "-o", "sub/x.png"]),
        (
            "latin1.json",
            b'{"schema_version": 1, "caf\xe9": 1}',
            ["merge", "latin1.json", "-o", "m.json"],
        ),
    ],
)
def test_hostile_files_through_a_real_process(tmp_path, name, data, args):
    """A few inputs as a user's shell runs them: a real process, its real stderr."""
    from tests.conftest import run_cli
    from tests.fuzzing import valid_results

    if data is None:
        data = json.dumps(valid_results()).replace('"tflops": ', '"tflops": 1e999, "_": ', 1)
        data = data.encode()
    (tmp_path / name).write_bytes(data)
    done = run_cli(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert name in done.stderr
