from __future__ import annotations

import dataclasses

import pytest

from ci_bench.contract.spec import Case, MatrixProfile, SpecError, Tolerance, grid, points
from kernels.matmul import SPEC


def test_case_id_is_readable_and_ordered():
    case = Case("matmul", {"B": 4, "M": 1024, "K": 1024, "N": 1024}, "bfloat16")
    assert case.id == "matmul/B4-M1024-K1024-N1024/bfloat16"
    assert case["K"] == 1024
    assert case == Case("matmul", {"B": 4, "M": 1024, "K": 1024, "N": 1024}, "bfloat16")


def test_grid_is_the_cartesian_product_in_key_order():
    assert grid(B=(1, 4), T=(256,)) == ({"B": 1, "T": 256}, {"B": 4, "T": 256})


def test_points_drops_duplicates_keeping_first_order():
    assert points([{"M": 1}, {"M": 2}], [{"M": 1}, {"M": 3}]) == ({"M": 1}, {"M": 2}, {"M": 3})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": "0.1"}, "not semver"),
        ({"name": "Bad-Name"}, "must match"),
        ({"tolerances": {"float32": Tolerance(1e-3, 1e-3)}}, "no tolerance for dtype bfloat16"),
        ({"matrix": {}}, "matrix wants one or more of smoke, ci, full"),
        ({"matrix": {"nightly": SPEC.matrix["smoke"]}}, "got 'nightly'"),
        ({"compute_unit": "tensor"}, "compute_unit must be one of matrix, vector"),
    ],
)
def test_spec_rejects_broken_contracts(change, message):
    with pytest.raises(SpecError, match=message):
        dataclasses.replace(SPEC, **change)


def test_tolerance_must_be_finite():
    with pytest.raises(SpecError, match="finite"):
        Tolerance(float("nan"), 0)


def test_matrix_profile_rejects_bad_values():
    with pytest.raises(SpecError, match="positive integer"):
        MatrixProfile(({"M": 0},), ("float32",))
    with pytest.raises(SpecError, match="unknown dtype"):
        MatrixProfile(({"M": 1},), ("int4",))


def test_case_from_shape_follows_the_specification_interface():
    case = SPEC.case_from_shape([1024, 1024, 1024], "bfloat16")
    assert case.id == "matmul/B1-M1024-K1024-N1024/bfloat16"
    assert SPEC.case_from_shape([4, 8, 16, 32], "float32").id == "matmul/B4-M8-K16-N32/float32"
    with pytest.raises(SpecError, match="wants M,K,N"):
        SPEC.case_from_shape([1, 2], "float32")
    with pytest.raises(SpecError, match="no tolerance"):
        SPEC.case_from_shape([1, 2, 3], "int8")
