"""Forward and backward modes, several implementations per kernel, abstract workloads:
the contract, the workloads a case times, and the gradient gate (issue 21)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ci_bench.contract.matrix import SelectionError, find_case, select
from ci_bench.contract.spec import Case, KernelSpec, MatrixProfile, SpecError, Tolerance, grid
from ci_bench.measure.correctness import check_gradient
from ci_bench.measure.harness import HarnessSettings, run_case
from ci_bench.measure.modes import case_workload, cotangent_like, mode_costs
from ci_bench.schema import CaseResult
from kernels.matmul import SPEC, matmul, matmul_tiled
from tests.fixtures.wrong_grad_matmul import SPEC as WRONG_GRAD

SETTINGS = HarnessSettings(warmup=1, repeats=3)
POINT = {"B": 1, "M": 128, "K": 128, "N": 128}


def no_peaks(dtype: str) -> tuple[None, None]:
    return None, None


def test_forward_ids_stay_as_they_were_and_other_modes_append_theirs():
    forward = Case("matmul", POINT, "bfloat16")
    assert forward.id == "matmul/B1-M128-K128-N128/bfloat16"
    assert forward.with_mode("backward").id == "matmul/B1-M128-K128-N128/bfloat16/backward"
    both = Case("matmul", POINT, "bfloat16", "forward+backward")
    assert both.id == "matmul/B1-M128-K128-N128/bfloat16/forward+backward"
    assert both != forward
    with pytest.raises(SpecError, match="unknown mode 'vjp'"):
        Case("matmul", POINT, "float32", "vjp")


def test_a_case_glob_selects_one_mode_alone_and_old_globs_keep_their_meaning():
    cases = SPEC.cases("full")
    backward = select(cases, ["*/backward"])
    forward = select(cases, ["*/forward"])
    both = select(cases, ["*/forward+backward"])
    assert backward
    assert all(c.mode == "backward" for c in backward)
    assert forward
    assert all(c.mode == "forward" for c in forward)
    assert both
    assert all(c.mode == "forward+backward" for c in both)
    assert len(forward) + len(backward) + len(both) == len(cases)
    # a glob written before modes existed still selects exactly the forward cases it did
    old = select(cases, ["matmul/B4-*/bfloat16"])
    assert [c.id for c in old] == [
        f"matmul/B4-M{s}-K{s}-N{s}/bfloat16" for s in (128, 1024, 4096, 127, 513)
    ]
    # `*` matches `/` too: a point's glob takes all its modes, `*backward` both backward ones
    assert {c.mode for c in select(cases, ["matmul/B4-M128-K128-N128/*"])} == set(SPEC.modes)
    assert {c.mode for c in select(cases, ["*backward"])} == {"backward", "forward+backward"}


def test_find_case_reads_every_mode_from_its_id():
    case = find_case(SPEC, "matmul/B1-M2048-K2048-N2048/bfloat16/backward")
    assert (case.mode, case["M"]) == ("backward", 2048)
    assert find_case(SPEC, "matmul/B1-M128-K128-N128/float32/forward").id == (
        "matmul/B1-M128-K128-N128/float32"
    )
    forward_only = dataclasses.replace(SPEC, modes=("forward",))
    with pytest.raises(SelectionError, match="has no mode 'backward'"):
        find_case(forward_only, "matmul/B1-M128-K128-N128/float32/backward")


def test_profiles_run_the_kernel_modes_they_name():
    smoke = SPEC.cases("smoke")
    assert {c.mode for c in smoke} == {"forward", "backward"}
    assert {c.mode for c in SPEC.cases("ci")} == {"forward", "backward"}
    assert {c.mode for c in SPEC.cases("full")} == {"forward", "backward", "forward+backward"}
    # points outer, dtypes, then modes: a kernel's modes of one case sit side by side
    assert [c.mode for c in smoke[:4]] == ["forward", "backward", "forward", "backward"]
    narrowed = dataclasses.replace(SPEC, modes=("forward",))
    assert {c.mode for c in narrowed.cases("smoke")} == {"forward"}
    assert len(narrowed.cases("smoke")) * 2 == len(smoke)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"modes": ()}, "at least one mode"),
        ({"modes": ("forward", "forward")}, "repeat"),
        ({"modes": ("forward", "vjp")}, "unknown mode 'vjp'"),
        (
            {
                "modes": ("backward",),
                "matrix": {"smoke": MatrixProfile(({"M": 1},), ("float32",), ("forward",))},
            },
            "runs none of the kernel's modes",
        ),
        ({"variants": {"native": jnp.matmul}}, "variant name 'native' is taken"),
        ({"variants": {"Fast-One": jnp.matmul}}, "variant name 'Fast-One' must match"),
        ({"subject": "triton"}, "subject 'triton' is not an implementation"),
        ({"baseline": "pallas"}, "subject and baseline are both 'pallas'"),
        (
            {"grad_tolerances": {"float32": Tolerance(atol=1e-2, rtol=1e-2)}},
            "no gradient tolerance for dtype bfloat16",
        ),
    ],
)
def test_the_spec_refuses_broken_modes_and_implementations(change, message):
    with pytest.raises(SpecError, match=message):
        dataclasses.replace(SPEC, **change)


def _pallas_calls(work) -> int:
    return str(jax.make_jaxpr(work.fn)(*work.args)).count("pallas_call")


def test_each_mode_traces_exactly_the_kernels_it_times_without_building_arrays():
    case = Case("matmul", {"B": 1, "M": 127, "K": 513, "N": 255}, "bfloat16")
    forward = case_workload(SPEC, case)
    backward = case_workload(SPEC, case.with_mode("backward"))
    both = case_workload(SPEC, case.with_mode("forward+backward"))
    for work in (forward, backward, both):
        assert all(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(work.args))
    # the CPU, TPU and GPU branches of platform_dependent each hold the kernel: 2 per call
    # on the CPU-and-TPU tiling plus the Triton one, so count relative to the forward
    per_call = _pallas_calls(forward)
    assert per_call >= 1
    assert _pallas_calls(backward) == 2 * per_call  # dA and dB, no forward recomputed
    assert _pallas_calls(both) == 3 * per_call
    # the backward call's arguments are the residuals (a, b) and the cotangent
    leaves = sorted(tuple(x.shape) for x in jax.tree.leaves(backward.args))
    assert leaves == sorted([(127, 513), (513, 255), (127, 255)])


def test_backward_residuals_are_computed_once_outside_the_timed_rounds():
    forward_runs = []

    @jax.custom_vjp
    def double(x):
        return x * 2

    def fwd(x):
        jax.debug.callback(lambda: forward_runs.append(1))
        return x * 2, None

    double.defvjp(fwd, lambda _, g: (g * 2,))
    spec = KernelSpec(
        name="double",
        version="0.1.0",
        pallas=double,
        native=lambda x: x * 2,
        reference=lambda x: x.astype(jnp.float32) * 2,
        make_inputs=lambda case, key: jax.random.normal(key, (8, 128), case.dtype),
        flops=lambda case: 8 * 128,
        bytes_accessed=lambda case: 2 * 8 * 128 * 4,
        tolerances={"float32": Tolerance(atol=1e-6, rtol=1e-6)},
        matrix={"smoke": MatrixProfile(grid(R=(8,)), ("float32",))},
        shape_keys=("R",),
        modes=("forward", "backward", "forward+backward"),
    )
    case = spec.cases("smoke")[1]
    assert case.mode == "backward"
    result = run_case(spec, case, HarnessSettings(warmup=2, repeats=5), no_peaks)
    assert result.status == "ok", result.error
    assert len(forward_runs) == 1  # the one residual computation: never in a timed call
    forward_runs.clear()
    both = run_case(spec, spec.cases("smoke")[2], HarnessSettings(warmup=2, repeats=5), no_peaks)
    assert both.status == "ok", both.error
    assert len(forward_runs) == 1 + 2 + 5  # the check, the warmup and every timed round


def test_cotangents_are_seeded_and_shaped_like_the_output():
    out = (jax.ShapeDtypeStruct((4, 8), jnp.bfloat16), jax.ShapeDtypeStruct((3,), jnp.int32))
    first, again, other = cotangent_like(out, 42), cotangent_like(out, 42), cotangent_like(out, 7)
    assert first[0].dtype == jnp.bfloat16
    assert first[0].shape == (4, 8)
    assert first[1].dtype == jax.dtypes.float0  # integer outputs have no gradient
    np.testing.assert_array_equal(first[0], again[0])
    assert not np.array_equal(first[0], other[0])


def test_backward_costs_are_derived_and_labelled_unless_declared():
    case = Case("matmul", {"B": 2, "M": 8, "K": 16, "N": 32}, "bfloat16", "backward")
    inputs = case_workload(SPEC, case.with_mode("forward")).args
    forward = 2 * 2 * 8 * 16 * 32
    flops, f_src, nbytes, b_src = mode_costs(SPEC, case, inputs, (0, 1))
    assert (flops, f_src, b_src) == (2 * forward, "derived", "derived")
    assert nbytes == 2 * (2 * 8 * 16 + 2 * 16 * 32 + 8 * 32) * 2  # read a, b, g; write dA, dB
    both = mode_costs(SPEC, case.with_mode("forward+backward"), inputs, (0, 1))
    assert both[0] == 3 * forward
    declared = dataclasses.replace(SPEC, backward_flops=lambda c: 7, backward_bytes=lambda c: 9)
    assert mode_costs(declared, case, inputs, (0, 1)) == (7, "declared", 9, "declared")
    assert mode_costs(declared, case.with_mode("forward"), inputs, (0, 1))[1] == "declared"


@pytest.mark.parametrize("mode", ["backward", "forward+backward"])
def test_the_project_matmul_backward_is_measured_and_its_gradients_checked(mode):
    case = Case("matmul", {"B": 1, "M": 127, "K": 513, "N": 255}, "bfloat16", mode)
    result = run_case(SPEC, case, SETTINGS, no_peaks)
    assert result.status == "ok", result.error
    assert result.mode == mode
    assert set(result.gradients) == {"a", "b"}
    assert all(g.ok and g.atol_scale and g.atol_scale > 0 for g in result.gradients.values())
    assert (result.correctness is not None) == (mode == "forward+backward")
    assert result.metrics.flops_source == "derived"
    factor = 2 if mode == "backward" else 3
    assert result.metrics.flops == factor * 2 * 127 * 513 * 255
    # XLA counts the native backward's two dots exactly: the derived model agrees
    assert result.cost_check.status == "ok"
    assert result.cost_check.ratio == pytest.approx(1.0, rel=0.02)
    assert CaseResult.model_validate_json(result.model_dump_json()) == result


def test_a_wrong_backward_is_an_error_naming_the_input_never_a_speedup():
    forward, backward = WRONG_GRAD.cases("smoke")
    assert run_case(WRONG_GRAD, forward, SETTINGS, no_peaks).status == "ok"
    result = run_case(WRONG_GRAD, backward, SETTINGS, no_peaks)
    assert result.status == "error"
    assert result.error.startswith("incorrect gradient for b: max abs err ")
    assert "for a" not in result.error
    assert result.speedup is None
    assert result.pallas is None
    assert result.gradients["a"].ok
    assert not result.gradients["b"].ok


def test_gradient_atol_is_in_units_of_the_reference_gradients_rms():
    ref = jnp.linspace(-30.0, 30.0, 1000)  # RMS ~17.3
    tol = Tolerance(atol=1e-2, rtol=0.0)
    near = check_gradient(ref + 0.1, ref, tol)  # 0.1 < 0.01 * 17.3
    far = check_gradient(ref + 0.3, ref, tol)
    assert near.ok
    assert not far.ok
    assert near.atol_scale == pytest.approx(float(jnp.sqrt(jnp.mean(ref**2))), rel=1e-5)
    zero = check_gradient(jnp.zeros(4), jnp.zeros(4), tol)  # no scale: atol as written
    assert zero.ok
    assert zero.atol_scale == 1.0


def _variants_spec(**change) -> KernelSpec:
    def tile256(a, b):
        from kernels.matmul import BlockSizes

        return matmul(a, b, BlockSizes(256, 256, 256))

    base = dataclasses.replace(
        SPEC,
        name="tilings",
        variants={"tile256": tile256, "xla": jnp.matmul},
        subject="tile256",
        matrix={"smoke": MatrixProfile(({"B": 1, "M": 256, "K": 256, "N": 256},), ("float32",))},
        modes=("forward", "backward"),
    )
    return dataclasses.replace(base, **change)


@pytest.mark.parametrize("mode", ["forward", "backward"])
def test_named_variants_are_timed_beside_the_subject_and_the_baseline(mode):
    spec = _variants_spec()
    case = next(c for c in spec.cases("smoke") if c.mode == mode)
    result = run_case(spec, case, SETTINGS, no_peaks)
    assert result.status == "ok", result.error
    names = result.implementations
    assert (names.subject, names.baseline) == ("tile256", "native")
    assert set(names.others) == {"pallas", "xla"}
    for other in names.others.values():
        assert other.timing is not None
        assert len(other.timing.samples_ms) == SETTINGS.repeats
        assert other.speedup == pytest.approx(result.native.mean_ms / other.timing.mean_ms)
        checked = other.correctness if mode == "forward" else other.gradients["b"]
        assert checked is not None
        assert checked.ok
    assert result.speedup == pytest.approx(result.native.mean_ms / result.pallas.mean_ms)


def test_a_wrong_variant_makes_the_case_an_error_naming_it():
    spec = _variants_spec(variants={"tile256": matmul, "broken": lambda a, b: matmul(a, b) * 1.5})
    case = spec.cases("smoke")[0]
    result = run_case(spec, case, SETTINGS, no_peaks)
    assert result.status == "error"
    assert result.error.startswith("broken: incorrect:")


def test_the_baseline_may_be_a_variant_and_its_backward_is_its_own_vjp():
    spec = _variants_spec(baseline="xla", subject="pallas")
    case = next(c for c in spec.cases("smoke") if c.mode == "backward")
    result = run_case(spec, case, SETTINGS, no_peaks)
    assert result.status == "ok", result.error
    assert (result.implementations.subject, result.implementations.baseline) == ("pallas", "xla")
    assert set(result.implementations.others) == {"tile256", "native"}


def test_matmul_tiled_multiplies_stored_transposes_in_both_tilings():
    a = jax.random.normal(jax.random.PRNGKey(0), (3, 200, 130))
    b = jax.random.normal(jax.random.PRNGKey(1), (3, 130, 70))
    want = jnp.matmul(a, b, precision="highest")
    at, bt = jnp.swapaxes(a, 1, 2), jnp.swapaxes(b, 1, 2)
    for backend in ("tpu", "gpu"):
        got_a = matmul_tiled(at, b, transpose_a=True, backend=backend)
        got_b = matmul_tiled(a, bt, transpose_b=True, backend=backend)
        np.testing.assert_allclose(got_a, want, atol=1e-4, rtol=1e-4)
        np.testing.assert_allclose(got_b, want, atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="incompatible shapes"):
        matmul_tiled(a, b, transpose_a=True)


def test_a_baseline_of_another_subject_is_incomparable_never_a_regression():
    from datetime import UTC, datetime
    from pathlib import Path

    from ci_bench.judge.compare import compare
    from ci_bench.schema import BaselineFile, FailPolicy, Implementations, Lookup, Thresholds
    from ci_bench.store.baselines import entry_from_results
    from tests.harness.factories import case, results

    cid = "matmul/B1-M128-K128-N128/float32"
    base = results([case(cid, 0.1)])
    entry = entry_from_results(base, "matmul", datetime(2026, 11, 2, tzinfo=UTC), "v0.1.0")
    stored = BaselineFile(kernel="matmul", version="0.1.0", entries=[entry])
    lookup = {"matmul": Lookup("matmul", "0.1.0", Path("b.json"), stored, None)}
    renamed = Implementations(subject="tile256", baseline="native")
    slower = case(cid, 10.0).model_copy(update={"implementations": renamed})
    report = compare(results([slower]), lookup, Thresholds(), FailPolicy())
    (verdict,) = report.cases
    assert verdict.verdict == "incomparable"
    assert verdict.reason == "baseline timed implementation pallas, this run tile256"
    same = case(cid, 10.0)
    assert compare(results([same]), lookup, Thresholds(), FailPolicy()).cases[0].verdict == (
        "regression"
    )


def test_report_rows_keep_a_cases_modes_together_worst_group_first():
    from ci_bench.report.rows import grouped
    from ci_bench.schema import CaseVerdict

    def verdict(cid: str, state: str, change: float) -> CaseVerdict:
        return CaseVerdict(id=cid, kernel="matmul", verdict=state, reason="r", mean_change=change)

    a, b = "matmul/B1-M128-K128-N128/float32", "matmul/B1-M256-K256-N256/float32"
    rows = [
        verdict(a, "pass", 0.0),
        verdict(f"{a}/forward+backward", "pass", 0.01),
        verdict(b, "pass", 0.0),
        verdict(f"{a}/backward", "pass", 0.02),
        verdict(f"{b}/backward", "regression", 0.3),
    ]
    assert [v.id for v in grouped(rows)] == [
        b,
        f"{b}/backward",
        a,
        f"{a}/backward",
        f"{a}/forward+backward",
    ]
