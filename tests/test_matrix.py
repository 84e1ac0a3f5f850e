from __future__ import annotations

import pytest

from ci_bench.contract.matrix import SelectionError, Shard, expand, select, shard
from kernels.matmul import SPEC

SPECS = {"matmul": SPEC}


def test_full_profile_is_the_specification_matrix():
    cases = expand(SPECS, "full")
    sizes = {(c["M"], c["K"], c["N"]) for c in cases}
    assert sizes == {(s, s, s) for s in (128, 1024, 4096, 127, 513)}
    assert {c.dtype for c in cases} == {"float32", "bfloat16"}
    assert {c["B"] for c in cases} == {1, 4, 16}
    forward = [c for c in cases if c.mode == "forward"]
    assert len(forward) == 5 * 2 * 3
    # every point and dtype is also timed backward and forward+backward (issue 21)
    assert len(cases) == len(forward) * 3
    assert {c.mode for c in cases} == {"forward", "backward", "forward+backward"}


def test_smoke_keeps_an_unaligned_case_a_batch_and_both_dtypes():
    cases = expand(SPECS, "smoke")
    assert any(c["M"] % 128 or c["K"] % 128 or c["N"] % 128 for c in cases)
    assert any(c["B"] > 1 for c in cases)
    assert {c.dtype for c in cases} == {"float32", "bfloat16"}


def test_case_ids_are_unique_in_every_profile():
    for profile in ("smoke", "ci", "full"):
        ids = [c.id for c in expand(SPECS, profile)]
        assert len(ids) == len(set(ids))


def test_unknown_kernel_and_profile_are_errors():
    with pytest.raises(SelectionError, match="unknown kernel nope"):
        expand(SPECS, "smoke", ["nope"])
    with pytest.raises(SelectionError, match="unknown profile"):
        expand(SPECS, "huge")


def test_select_by_glob_and_reject_patterns_matching_nothing():
    cases = expand(SPECS, "full")
    chosen = select(cases, ["matmul/B4-*/bfloat16"])
    assert chosen
    assert all(c["B"] == 4 and c.dtype == "bfloat16" for c in chosen)
    with pytest.raises(SelectionError, match="matches no case"):
        select(cases, ["gla/*"])


def test_shards_partition_the_matrix():
    cases = expand(SPECS, "full")
    parts = [shard(cases, Shard(i, 4)) for i in range(1, 5)]
    ids = [c.id for part in parts for c in part]
    assert sorted(ids) == sorted(c.id for c in cases)
    assert len(ids) == len(set(ids))
    assert max(map(len, parts)) - min(map(len, parts)) <= 1


@pytest.mark.parametrize("text", ["0/4", "5/4", "a/b", "3"])
def test_bad_shard_specs_are_rejected(text):
    with pytest.raises(SelectionError):
        Shard.parse(text)
