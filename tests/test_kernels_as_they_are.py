"""Issue 12: errors that help, memory-bound headlines, the TPU interpreter on CPU."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ci_bench.contract.spec import Case, Tolerance
from ci_bench.measure.harness import HarnessSettings, check_outputs, run_case
from ci_bench.measure.roofline import compute_metrics
from ci_bench.report.render import fmt_util
from ci_bench.schema import RESULTS_SCHEMA_VERSION, Results
from ci_bench.store.files import read_model
from kernels.matmul import SPEC
from tests.conftest import REPO, run_cli, write_project

SETTINGS = HarnessSettings(warmup=1, repeats=2)
SMALL = Case("matmul", {"B": 1, "M": 128, "K": 128, "N": 128}, "float32")
EXAMPLES = REPO / "examples"


def no_peaks(dtype):
    return None, None


def test_nan_and_inf_are_counted_and_named():
    ref = jnp.zeros((32, 32))
    out = ref.at[0, :12].set(jnp.nan).at[1, :3].set(jnp.inf)
    check = check_outputs(out, ref, Tolerance(1e-3, 1e-3))
    assert (check.nan, check.inf, check.elements) == (12, 3, 1024)
    nan_spec = dataclasses.replace(
        SPEC, pallas=lambda a, b: jnp.matmul(a, b).at[0, :12].set(jnp.nan)
    )
    result = run_case(nan_spec, SMALL, SETTINGS, no_peaks)
    assert result.status == "error"
    assert "12 of 16384 outputs are NaN" in result.error
    assert "None" not in result.error


def test_a_failed_case_keeps_its_traceback_and_input_time():
    def broken(a, b):
        raise RuntimeError("boom in the kernel")

    result = run_case(dataclasses.replace(SPEC, pallas=broken), SMALL, SETTINGS, no_peaks)
    assert result.error == "RuntimeError: boom in the kernel"
    assert "Traceback" in result.traceback
    assert "in broken" in result.traceback
    assert result.inputs_ms is not None
    assert result.inputs_ms >= 0
    ok = run_case(SPEC, SMALL, SETTINGS, no_peaks)
    assert ok.inputs_ms is not None
    assert ok.traceback is None
    assert ok.bytes_check.status == "ok"  # XLA counts jnp.matmul's bytes as the model does


def test_make_inputs_returning_a_bare_array_is_wrapped():
    square = dataclasses.replace(
        SPEC,
        make_inputs=lambda case, key: jax.random.normal(key, (128, 128), case.dtype),
        pallas=lambda a: SPEC.pallas(a, a),
        native=lambda a: a @ a,
        reference=lambda a: SPEC.reference(a, a),
    )
    assert run_case(square, SMALL, SETTINGS, no_peaks).status == "ok"


@pytest.mark.parametrize(
    ("unit", "flops", "bound", "cell"),
    [
        ("vector", 4 * 10**6, "memory", "HBM"),  # a norm: AI ~0.5
        ("matrix", 2 * 10**12, "compute", "MFU"),  # a big matmul
        ("matrix", 10**6, "memory", "HBM"),  # a tiny matmul is memory-bound too
    ],
)
def test_the_roofline_bound_picks_the_headline_and_mfu_needs_the_matrix_unit(
    unit, flops, bound, cell
):
    m = compute_metrics(
        flops=flops,
        bytes_accessed=8 * 10**6,
        mean_ms=0.01,
        peak_tflops=197.0,
        peak_gbps=819.0,
        compute_unit=unit,
    )
    assert m.bound == bound
    assert (m.mfu is None) == (unit == "vector")
    assert fmt_util(m).endswith(cell)
    assert m.achieved_gbps == pytest.approx(800.0)


def test_cpu_without_peaks_shows_nothing_invented():
    m = compute_metrics(
        flops=10,
        bytes_accessed=10,
        mean_ms=1,
        peak_tflops=None,
        peak_gbps=None,
        compute_unit="vector",
    )
    assert m.headline == "hbm"
    assert fmt_util(m) == "–"


def test_project_tpu_variants_run_under_the_tpu_interpreter():
    from jax.experimental.pallas import tpu as pltpu

    from kernels.gla import SPEC as GLA
    from kernels.gla.kernel import chunk_gla, tpu_interpreter_forced
    from kernels.matmul.kernel import matmul_tiled

    case = Case("gla", {"B": 1, "T": 96, "H": 1, "K": 64, "V": 64}, "float32")
    q, k, v, g = GLA.make_inputs(case, jax.random.PRNGKey(0))
    a = jax.random.normal(jax.random.PRNGKey(1), (130, 200))
    assert not tpu_interpreter_forced()
    with pltpu.force_tpu_interpret_mode():
        assert tpu_interpreter_forced()
        o = chunk_gla(q, k, v, g, backend="tpu", interpret=False)
        o_default = chunk_gla(q, k, v, g)  # the CPU branch picks the TPU variant here
        c = matmul_tiled(a, a.T, backend="tpu", interpret=False)
    ref = GLA.reference(q, k, v, g)
    np.testing.assert_allclose(o, ref, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(o_default, ref, atol=1e-4, rtol=1e-4)
    # On a TPU, float32 operands make one bfloat16 pass (XLA's DEFAULT there): the product
    # of the rounded operands, to float32 accumulation.
    rounded = a.astype(jnp.bfloat16).astype(jnp.float32)
    np.testing.assert_allclose(c, rounded @ rounded.T, atol=1e-3, rtol=1e-5)


def test_cpu_interpret_tpu_runs_the_project_matmul_and_is_recorded(tmp_path):
    write_project(tmp_path, ["kernels.matmul"], 'cpu-interpret = "tpu"\n')
    out = tmp_path / "r.json"
    done = run_cli(
        "run",
        "--case",
        "matmul/B1-M128-K128-N128/float32",
        "--repeats",
        "2",
        "--warmup",
        "0",
        "-o",
        str(out),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    results = read_model(out, Results, what="results", schema_version=RESULTS_SCHEMA_VERSION)
    assert results.meta.settings.interpret_mode == "tpu"
    assert results.cases[0].status == "ok"


def test_a_tpu_only_jax_kernel_runs_through_config_alone(tmp_path):
    config = EXAMPLES / "tpu_matmul" / "pyproject.toml"
    out = tmp_path / "r.json"
    args = ("--case", "*N128*", "--repeats", "2", "--warmup", "0", "--no-compilation-cache")
    done = run_cli("run", "--config", str(config), *args, "-o", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (case,) = read_model(out, Results, what="results", schema_version=RESULTS_SCHEMA_VERSION).cases
    assert case.status == "ok"
    assert case.correctness.ok
    # the same kernel without the TPU interpreter: a one-line error with the fix, the
    # traceback in the file and the log, never in the table
    plain = run_cli(
        "run",
        "--config",
        str(config),
        *args,
        "--cpu-interpret",
        "kernel",
        "-o",
        str(out),
        "--force",
        cwd=tmp_path,
    )
    assert plain.returncode == 3
    (case,) = json.loads(Path(out).read_text())["cases"]
    assert "Only interpret mode is supported on CPU" in case["error"]
    assert "--cpu-interpret tpu" in case["error"]
    assert "Traceback" in case["traceback"]
    assert "Traceback" in plain.stderr
    assert "Traceback" not in plain.stdout


def test_the_kernel_mode_undoes_an_earlier_tpu_mode_in_the_same_process():
    """In-process runs (pytest's assert_no_regression, the fuzzer) share one process: after
    a ``tpu`` run, a ``kernel`` run lets a kernel's own ``interpret=False`` lower for TPU
    again instead of running under the interpreter."""
    from jax._src import config as jax_config

    from ci_bench.measure.interpret import apply_interpret_mode

    setting = jax_config.pallas_tpu_interpret_mode_context_manager
    assert apply_interpret_mode("tpu") == "tpu"
    assert setting.value is not None
    assert apply_interpret_mode("kernel") == "kernel"
    assert setting.value is None
    a = jax.ShapeDtypeStruct((128, 128), jnp.float32)
    from kernels.matmul.backward import matmul

    text = jax.export.export(jax.jit(matmul), platforms=["tpu"])(a, a).mlir_module()
    assert "tpu_custom_call" in text
