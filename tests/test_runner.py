from __future__ import annotations

import dataclasses
import io
from datetime import UTC, datetime

import pytest

from ci_bench.measure.devices import fingerprint
from ci_bench.measure.progress import Progress
from ci_bench.measure.roofline import peak_lookup
from ci_bench.measure.runner import run_all
from ci_bench.measure.settings import HarnessSettings
from ci_bench.schema import DeviceFingerprint, RunMeta, RunSettings
from kernels.matmul import SPEC, VERSION

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def meta() -> RunMeta:
    return RunMeta(
        tool_version="test",
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        complete=False,
        profile="smoke",
        device=fingerprint(),
        settings=RunSettings(warmup=0, repeats=1, seed=0, interpret=True),
        kernels={"matmul": VERSION},
    )


def test_an_interrupt_keeps_every_case_measured_so_far(tmp_path):
    calls = {"n": 0}

    def interrupted(a, b):
        calls["n"] += 1
        if a.shape[0] == 127:
            raise KeyboardInterrupt
        return SPEC.pallas(a, b)

    spec = dataclasses.replace(SPEC, pallas=interrupted)
    saved = []
    cases = SPEC.cases("smoke")
    with pytest.raises(KeyboardInterrupt):
        run_all(
            {"matmul": spec},
            cases,
            HarnessSettings(warmup=0, repeats=1),
            meta(),
            lambda dtype: (None, None),
            progress=Progress(io.StringIO(), live=False),
            save=saved.append,
            now=lambda: NOW,
        )
    # the forward and backward cases of both dtypes of the first point, then the interrupt
    assert [len(r.cases) for r in saved] == [1, 2, 3, 4]
    assert all(not r.meta.complete for r in saved)
    assert all(c.status == "ok" for c in saved[-1].cases)


def test_run_all_saves_the_finished_run(tmp_path):
    saved = []
    results = run_all(
        {"matmul": SPEC},
        SPEC.cases("smoke")[:1],
        HarnessSettings(warmup=0, repeats=1),
        meta(),
        lambda dtype: (None, None),
        progress=Progress(io.StringIO(), live=False),
        save=saved.append,
        now=lambda: NOW,
    )
    assert saved[-1].meta.complete
    assert saved[-1].meta.finished_at is not None
    assert saved[-1] == results  # the run returned is the one saved last


def test_peak_overrides_win_and_cpu_has_no_table_entry():
    cpu = fingerprint()
    assert peak_lookup(cpu.device_kind, cpu.platform)("bfloat16") == (None, None)
    assert peak_lookup(cpu.device_kind, cpu.platform, 10.0, 100.0)("float32") == (10.0, 100.0)
    h200 = DeviceFingerprint(
        **{**cpu.model_dump(), "platform": "gpu", "device_kind": "NVIDIA H200"}
    )
    assert peak_lookup(h200.device_kind, h200.platform)("bfloat16") == (989.4, 4800.0)
