"""``ci-bench remodel --deviceless CHIP``: a host without a TPU models a TPU's baseline entries
as the chip's run did, libtpu answering the chip's layouts (``measure.deviceless``).

libtpu is 0.7 GB and CI installs none, so the end-to-end check (the shipped baselines read
"unchanged") runs where ``jax[tpu]`` is installed and says so where it is not; everything
else (the layout as XLA prints it, which entries are modelled, the refusals) is checked
here without it."""

from __future__ import annotations

import importlib.metadata
import json

import pytest

from ci_bench.errors import ExitCode
from ci_bench.measure import deviceless
from ci_bench.measure.model.layouts import parse_major_to_minor
from ci_bench.pipeline.remodel import _Session
from ci_bench.schema import DeviceFingerprint
from tests.conftest import REPO, run_cli


def _libtpu() -> bool:
    try:
        importlib.metadata.version("libtpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_the_parser_offers_the_chips_libtpu_compiles_for():
    done = run_cli("remodel", "--deviceless", "v9z", "x.json", cwd=REPO)
    assert done.returncode == ExitCode.USAGE
    assert "invalid choice: 'v9z' (choose from 'v5e', 'v6e')" in done.stderr


@pytest.mark.parametrize(
    ("major_to_minor", "tiling", "expected", "order"),
    [
        ((1, 0, 2), ((4, 128),), "{2,0,1:T(4,128)}", (1, 0, 2)),  # v5e's batch-middle f32
        ((0, 1, 2), ((8, 128), (2, 1)), "{2,1,0:T(8,128)(2,1)}", (0, 1, 2)),  # packed bf16
        ((0,), (), "{0}", (0,)),
    ],
)
def test_a_layout_is_printed_as_xla_prints_it(major_to_minor, tiling, expected, order):
    text = deviceless.printed(major_to_minor, tiling)
    assert text == expected
    assert parse_major_to_minor(text) == order  # what the model and the kernels read


def test_the_worker_is_told_its_chip_and_stays_on_the_cpu():
    env = deviceless.worker_env("v5e")
    assert deviceless.requested(env) == "v5e"
    assert env["JAX_PLATFORMS"] == "cpu"  # jax never takes an accelerator
    assert env["TPU_ACCELERATOR_TYPE"] == "v5litepod-1"
    assert deviceless.requested({}) is None
    assert deviceless.requested({deviceless.ENV: "v9z"}) is None  # not a chip it knows


def _device(platform: str, kind: str) -> DeviceFingerprint:
    return DeviceFingerprint(
        platform=platform, device_kind=kind, device_count=1, cpu_model="x", hostname="h",
        python="3.11", jax="0.10.2", jaxlib="0.10.2",
    )  # fmt: skip


def test_only_the_named_chips_entries_are_modelled():
    session = _Session(None, None, "v5e", "v5e", None, False, None, print)  # type: ignore[arg-type]
    assert session.models(_device("tpu", "TPU v5 lite"))
    assert session.models(_device("tpu", "TPU v5e"))  # the same chip, by its other name
    assert not session.models(_device("tpu", "TPU v4"))
    assert not session.models(_device("cpu", "cpu"))
    assert session.elsewhere(_device("tpu", "TPU v4")) == (
        "measured on tpu:TPU v4, not a v5e: remodel it there"
    )
    on_a_cpu = _Session(None, None, "cpu", None, None, False, None, print)  # type: ignore[arg-type]
    assert on_a_cpu.models(_device("cpu", "cpu"))
    assert not on_a_cpu.models(_device("tpu", "TPU v5 lite"))


@pytest.mark.skipif(_libtpu(), reason="libtpu is installed here: its absence is not testable")
def test_without_libtpu_it_is_one_line_and_nothing_is_written(tmp_path):
    shipped = REPO / "baselines" / "gla_v0.7.0.json"
    copy = tmp_path / shipped.name
    copy.write_text(shipped.read_text())
    done = run_cli("remodel", "--deviceless", "v5e", str(copy), "-q", cwd=REPO)
    assert done.returncode == ExitCode.USAGE
    assert done.stderr.strip() == (
        "ci-bench: error: --deviceless v5e: libtpu is not installed here "
        "(pip install 'jax[tpu]', the host's jax version)"
    )
    assert copy.read_text() == shipped.read_text()


@pytest.mark.skipif(not _libtpu(), reason="needs libtpu (pip install 'jax[tpu]'); CI has none")
def test_a_cpu_with_libtpu_models_the_shipped_tpu_baselines_as_the_chip_did():
    """The shipped matmul baseline has cases whose kernel path the chip's layout picks (the
    batched float32 513³ is stored batch-middle on a v5e); modelled here at da34988 (0.11.0's
    programs; its measured commit asked jax's client itself), every figure on every chip is
    the one written into it (by this command: they read unchanged, at this revision)."""
    for name, at in (("matmul_v0.11.0.json", "da34988"), ("gla_v0.7.0.json", "d1fc397")):
        path = REPO / "baselines" / name
        entry = json.loads(path.read_text())["entries"][0]
        args = ("remodel", "--deviceless", "v5e", "--check", str(path), "--at", at, "-q")
        done = run_cli(*args, cwd=REPO, process=True)
        assert done.returncode == ExitCode.OK, done.stdout + done.stderr
        assert done.stdout.startswith(f"unchanged: {path} (tpu:TPU v5 lite)"), done.stdout
        assert f"{len(entry['cases'])} cases" in done.stdout


@pytest.mark.skipif(_libtpu(), reason="libtpu is installed here: its absence is not testable")
def test_analyze_without_libtpu_is_one_line():
    done = run_cli(
        "analyze", "--deviceless", "v5e", "--kernel", "matmul", "--profile", "ci", "--case",
        "matmul/B4-M513-*", "-q", cwd=REPO,
    )  # fmt: skip
    assert done.returncode == ExitCode.USAGE
    assert done.stderr.strip().startswith("ci-bench: error: --deviceless v5e: libtpu is not")
    assert done.stdout == ""


@pytest.mark.skipif(not _libtpu(), reason="needs libtpu (pip install 'jax[tpu]'); CI has none")
def test_analyze_with_the_chips_layouts_models_what_the_chips_run_modelled():
    """The batched float32 matmul at 513³ takes its DMA kernel where the chip stores its
    operands batch-middle: a CPU's row-major guess models the other kernel; with a v5e's
    layouts from libtpu, ``analyze`` gives the figure the chip's run wrote."""
    case = "matmul/B4-M513-K513-N513/float32"
    (entry,) = json.loads((REPO / "baselines" / "matmul_v0.11.0.json").read_text())["entries"]
    chip_run = next(c for c in entry["cases"] if c["id"] == case)["model"]["chips"]["v5e"]
    figures = {}
    for extra in ((), ("--deviceless", "v5e")):
        done = run_cli(
            "analyze", "--kernel", "matmul", "--profile", "ci", "--case", case, "--chip",
            "v5e", "--format", "json", "-q", *extra, cwd=REPO, process=True,
        )  # fmt: skip
        assert done.returncode == ExitCode.OK, done.stderr
        (one,) = json.loads(done.stdout)["cases"]
        figures[extra] = one["chips"]["v5e"]["modelled_us"]
    assert figures[("--deviceless", "v5e")] == chip_run["modelled_us"]
    assert figures[()] != chip_run["modelled_us"]  # row-major: the other kernel
