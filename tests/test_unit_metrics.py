"""The specification's section 3.3 metrics, read from traces and LLO dumps recorded on a
TPU v5e (tests/fixtures/tpu_v5e/README.md): the reader, the hints, and ``ci-bench profile
--read`` as a user runs it on a CPU."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from jax.profiler import ProfileData

from ci_bench.errors import ExitCode
from ci_bench.measure.unit_metrics import (
    has_counters,
    libtpu_args,
    metric_env,
    read_dumps,
    read_trace,
    with_dumps,
)
from ci_bench.report.unit_metrics import hints, metrics_table
from ci_bench.schema.unit_metrics import KernelUnitMetrics
from tests.conftest import run_cli

CHIP = Path(__file__).parent / "fixtures" / "tpu_v5e"


def recorded(name: str) -> str:
    with gzip.open(CHIP / f"{name}.trace.textproto.gz", "rt") as f:
        return f.read()


def xplane(tmp: Path, name: str) -> Path:
    """The recorded trace as the ``.xplane.pb`` file jax writes."""
    path = tmp / f"{name}.xplane.pb"
    path.write_bytes(ProfileData.text_proto_to_serialized_xspace(recorded(name)))
    return path


def metrics_of(name: str) -> KernelUnitMetrics:
    (found,) = read_trace(ProfileData.from_text_proto(recorded(name)))
    (facts,) = with_dumps([found], read_dumps(CHIP / f"{name}.llo", [found.kernel]))
    return facts


def test_bigger_tiles_show_as_the_specification_reads_them():
    """128³ tiles: the MXU idles (4 %) behind scalar index work; 512³ tiles: the MXU busy
    half the time, with spills: the specification's two readings, from the chip."""
    small, big = metrics_of("matmul-1024-t128"), metrics_of("matmul-1024-t512")
    assert small.kernel == big.kernel == "matmul_tiled.1"
    assert small.device_us == pytest.approx(180.855, abs=0.01)
    assert big.device_us == pytest.approx(20.163, abs=0.01)
    assert small.utilisation["MXU"] == pytest.approx(4.25, abs=0.01)
    assert big.utilisation["MXU"] == pytest.approx(50.46, abs=0.01)
    assert small.utilisation["Scalar ALU"] == pytest.approx(30.42, abs=0.01)
    assert big.utilisation["Scalar ALU"] == pytest.approx(16.32, abs=0.01)
    assert (small.spills, small.fills) == (0, 0)
    assert (big.spills, big.fills) == (87, 257)
    assert small.covered > 0.98
    assert big.covered > 0.99
    assert any("MXU 4 %" in h for h in hints(small))
    assert not any("spills" in h for h in hints(small))
    assert any("87 vector spills" in h and "smaller tiles" in h for h in hints(big))


def test_the_dump_gives_bundles_register_pressure_and_dma_instructions():
    big = metrics_of("matmul-1024-t512")
    assert big.bundles == 2435
    assert big.register_pressure == 137
    # A bounds check's comment names the output DMA again: counted once.
    assert big.dma == {"done.wait": 3, "hbm_to_vmem": 2, "vmem_to_hbm": 1}
    small = metrics_of("matmul-1024-t128")
    assert (small.bundles, small.register_pressure) == (218, None)  # no pressure file written
    (gla,) = read_dumps(CHIP / "gla-fwd-ci.llo", ["chunk_gla_fwd.1"]).values()
    assert (gla.bundles, gla.register_pressure, gla.dma) == (829, 99, {})


def test_a_trace_taken_without_the_flags_has_kernels_but_no_counters():
    profile = ProfileData.from_text_proto(recorded("matmul-1024-t512.plain"))
    assert not has_counters(profile)
    assert has_counters(ProfileData.from_text_proto(recorded("matmul-1024-t512")))
    (plain,) = read_trace(profile)
    assert plain.utilisation == {}
    assert plain.spills is None
    assert plain.device_us == pytest.approx(20.16, abs=0.05)


def test_flags_follow_what_the_user_already_set(tmp_path):
    args = libtpu_args("--xla_tpu_foo=1", tmp_path / "llo")
    assert args.startswith("--xla_tpu_foo=1 --xla_enable_custom_call_region_trace=true")
    assert f"--xla_jf_dump_to={tmp_path / 'llo'}" in args
    assert "--xla_jf_dump_llo_text=true" in args
    assert "jf_dump" not in libtpu_args("", None)
    env = metric_env({"LIBTPU_INIT_ARGS": "--xla_tpu_foo=1", "HOME": "/h"}, tmp_path)
    assert env["LIBTPU_INIT_ARGS"] == libtpu_args("--xla_tpu_foo=1", tmp_path)
    # a compilation-cache hit compiles nothing: libtpu would dump nothing
    assert env["JAX_ENABLE_COMPILATION_CACHE"] == "false"
    assert env["HOME"] == "/h"


def unit(**fields) -> KernelUnitMetrics:
    base = {"kernel": "k.1", "calls": 1, "device_us": 10.0, "covered": 1.0}
    return KernelUnitMetrics.model_validate({**base, **fields})


def test_each_hint_fires_at_its_threshold_and_not_below():
    assert any("index arithmetic" in h for h in hints(unit(utilisation={"Scalar ALU": 62.0})))
    assert hints(unit(utilisation={"Scalar ALU": 49.0, "MXU": 60.0})) == []
    assert hints(unit(utilisation={"MXU": 0.0})) == []  # no matmul: no MXU advice
    stored = hints(unit(utilisation={"Vector Store": 93.0}))
    assert any("write-back bound" in h for h in stored)
    waits = hints(unit(bundles=10, dma={"hbm_to_vmem": 4, "vmem_to_hbm": 1, "done.wait": 2}))
    assert any("2 DMA waits for 5 copies" in h and "normal" in h for h in waits)
    assert hints(unit(bundles=10, dma={"hbm_to_vmem": 2, "vmem_to_hbm": 1, "done.wait": 3})) == []


def test_the_table_shows_absent_figures_as_absent():
    table = metrics_table([unit(utilisation={"MXU": 12.5})])
    row = next(line for line in table.splitlines() if line.startswith("k.1"))
    assert "12.5 %" in row
    assert row.split()[-3:] == ["–", "–", "–"]  # DMA, bundles, vregs: no dump read


def test_profile_read_prints_the_table_of_a_saved_trace_on_a_cpu(tmp_path, project):
    trace = xplane(tmp_path, "matmul-1024-t512")
    dumps = CHIP / "matmul-1024-t512.llo"
    done = run_cli("profile", "--read", str(trace), "--dumps", str(dumps), cwd=project)
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("matmul_tiled.1"))
    assert row.split()[:3] == ["matmul_tiled.1", "20.2", "50.5"]
    assert "87/257" in row
    assert "2 in, 1 out, 3 waits" in row
    assert "2435" in row
    assert "87 vector spills (257 fills)" in done.stdout
    as_json = run_cli(
        "profile", "--read", str(trace), "--dumps", str(dumps), "--format", "json", cwd=project
    )
    (profile,) = json.loads(as_json.stdout)["profiles"]
    (kernel,) = profile["metrics"]
    assert kernel["utilisation"]["MXU"] == pytest.approx(50.46)
    assert kernel["register_pressure"] == 137
    shown = [
        line.removeprefix("matmul_tiled.1: ")
        for line in done.stdout.splitlines()
        if line.startswith("matmul_tiled.1: ")
    ]
    assert kernel["hints"] == shown
    assert len(shown) == 1


def test_profile_read_finds_each_cases_trace_and_dumps_in_a_profile_folder(tmp_path, project):
    """``--read`` of the folder ``profile --out`` wrote for two cases: each case's newest
    trace under <case>/trace/, its LLO dumps under <case>/llo/ found without ``--dumps``."""
    folder = tmp_path / "prof"
    for name in ("matmul-1024-t128", "matmul-1024-t512"):
        case = folder / name
        for run in ("2026_12_06_02_13_09", "2026_12_06_02_13_10"):  # an older run, then ours
            run_dir = case / "trace" / "plugins" / "profile" / run
            run_dir.mkdir(parents=True)
            xplane(tmp_path, name).rename(run_dir / "host.xplane.pb")
        (case / "llo").mkdir()
        for path in (CHIP / f"{name}.llo").iterdir():
            (case / "llo" / path.name).write_bytes(path.read_bytes())
    done = run_cli("profile", "--read", str(folder), cwd=project)
    assert done.returncode == 0, done.stderr
    traces = [line for line in done.stdout.splitlines() if line.startswith("trace: ")]
    assert [t.split("/prof/")[1] for t in traces] == [
        f"{name}/trace/plugins/profile/2026_12_06_02_13_10/host.xplane.pb"
        for name in ("matmul-1024-t128", "matmul-1024-t512")
    ]
    rows = [
        line.split()[:3] for line in done.stdout.splitlines() if line.startswith("matmul_tiled.1 ")
    ]
    assert rows == [["matmul_tiled.1", "180.9", "4.2"], ["matmul_tiled.1", "20.2", "50.5"]]
    assert done.stdout.count("2 in, 1 out, 3 waits") == 2  # both dump folders found
    assert "MXU 4 %: the MXU waits" in done.stdout


def test_profile_read_says_what_a_trace_lacks(tmp_path, project):
    plain = run_cli(
        "profile", "--read", str(xplane(tmp_path, "matmul-1024-t512.plain")), cwd=project
    )
    assert plain.returncode == 0
    assert "no unit counters" in plain.stdout
    assert "LIBTPU_INIT_ARGS" in plain.stdout
    assert "matmul_tiled.1" not in plain.stdout


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp: tmp / "absent.xplane.pb", "does not exist"),
        (lambda tmp: tmp, "no .xplane.pb"),
        (
            lambda tmp: (tmp / "bad.xplane.pb", (tmp / "bad.xplane.pb").write_text("x"))[0],
            "not a readable trace",
        ),
    ],
    ids=["absent", "empty-folder", "not-a-trace"],
)
def test_profile_read_of_a_bad_path_is_one_line(tmp_path, project, make, message):
    done = run_cli("profile", "--read", str(make(tmp_path)), cwd=project)
    assert done.returncode == ExitCode.USAGE
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_profile_on_a_cpu_writes_the_trace_and_says_the_metrics_need_a_tpu(tmp_path, project):
    out = tmp_path / "p"
    case = "matmul/B1-M128-K128-N128/float32"
    done = run_cli(
        "profile",
        "--case",
        case,
        "--out",
        str(out),
        "--runs",
        "1",
        "--set",
        "block_m=64",
        cwd=project,
    )
    assert done.returncode == 0, done.stderr
    assert list((out / "trace" / "plugins" / "profile").glob("*/*.xplane.pb"))
    needs = [line for line in done.stdout.splitlines() if "need a TPU" in line]
    assert needs == [
        "unit metrics (MXU, scalar ALU, spills, DMA) need a TPU: this trace ran on cpu"
    ]
    bad = run_cli("profile", "--case", case, "--out", str(out), "--set", "block_q=8", cwd=project)
    assert bad.returncode == ExitCode.USAGE
    assert "no tunable 'block_q' (known: block_m, block_k, block_n)" in bad.stderr


def _plane(name: str, op: str, mxu: float) -> str:
    """A device plane holding one op over 0-100 ns and an MXU counter over it."""
    return f"""planes {{
  name: "{name}"
  lines {{ id: 1 name: "XLA Ops" timestamp_ns: 0
    events {{ metadata_id: 1 offset_ps: 0 duration_ps: 100000 }} }}
  lines {{ id: 2 name: "_counters_" timestamp_ns: 0
    events {{ metadata_id: 2 offset_ps: 0 duration_ps: 100000
      stats {{ metadata_id: 1 double_value: {mxu} }} }} }}
  event_metadata {{ key: 1 value {{ id: 1 name: "{op}" }} }}
  event_metadata {{ key: 2 value {{ id: 2 name: "MXU" }} }}
  stat_metadata {{ key: 1 value {{ id: 1 name: "% util" }} }}
}}
"""


def test_each_chips_counters_stay_its_own():
    """A trace of two chips over the same moments: the kernel's figures come from the chip
    that ran it, never averaged with another chip's counters."""
    pallas = '%k.1 = f32[8] custom-call(), custom_call_target=\\"tpu_custom_call\\"'
    text = _plane("/device:TPU:1", "%fusion = f32[8] add()", 100.0)
    text += _plane("/device:TPU:0", pallas, 50.0)
    (found,) = read_trace(ProfileData.from_text_proto(text))
    assert found.kernel == "k.1"
    assert found.utilisation["MXU"] == 50.0
    assert found.covered == 1.0
