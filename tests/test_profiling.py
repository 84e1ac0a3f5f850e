"""jax.profiler traces in the layout xprof/TensorBoard read, and one-line failures."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from ci_bench.contract.matrix import SelectionError, find_case
from ci_bench.measure.profiling import (
    ProfilingError,
    capture_trace,
    top_level_jit,
    trace_case,
    viewer_commands,
)
from kernels.matmul import SPEC, matmul_tiled

CASE = "matmul/B1-M128-K128-N128/float32"


def test_trace_of_the_matmul_smoke_case_lands_where_xprof_looks(tmp_path: Path) -> None:
    info = trace_case(SPEC, CASE, tmp_path / "trace")
    assert info.log_dir == tmp_path / "trace"
    assert info.runs == 3
    assert info.xplane_files
    for xplane in info.xplane_files:
        # <logdir>/plugins/profile/<session>/<host>.xplane.pb
        assert xplane.parent == info.run_dir
        assert xplane.relative_to(info.log_dir).parts[:2] == ("plugins", "profile")
        assert xplane.name.endswith(".xplane.pb")
        assert xplane.stat().st_size > 0
    assert f"xprof --logdir={info.log_dir}" in info.describe()
    assert any(c.startswith("tensorboard --logdir=") for c in info.commands)


def test_older_sessions_in_the_log_dir_are_not_reported(tmp_path: Path) -> None:
    stale = tmp_path / "plugins" / "profile" / "2001_01_01_00_00_00" / "old.xplane.pb"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    info = capture_trace(jnp.matmul, (jnp.ones((8, 8)), jnp.ones((8, 8))), tmp_path, runs=1)
    assert stale not in info.xplane_files
    assert info.run_dir != stale.parent


def test_a_plain_function_is_wrapped_in_one_jit_and_a_jitted_one_kept() -> None:
    def plain(a: jax.Array) -> jax.Array:
        return jnp.tanh(a) * 2

    wrapped = top_level_jit(plain)
    assert wrapped is not plain
    assert callable(wrapped.lower)
    assert top_level_jit(matmul_tiled) is matmul_tiled
    # One module: the whole function lowers to a single HLO module.
    assert "HloModule jit_plain" in wrapped.lower(jnp.ones(4)).as_text(dialect="hlo")


def test_a_running_trace_is_a_one_line_error(tmp_path: Path) -> None:
    jax.profiler.start_trace(str(tmp_path / "other"))
    try:
        with pytest.raises(ProfilingError, match="cannot start a trace") as err:
            capture_trace(jnp.matmul, (jnp.ones((4, 4)), jnp.ones((4, 4))), tmp_path / "mine")
        assert "\n" not in str(err.value)
    finally:
        jax.profiler.stop_trace()


def test_a_failing_kernel_is_a_one_line_error_and_leaves_no_trace_running(tmp_path: Path) -> None:
    def broken(a: jax.Array) -> jax.Array:
        raise ValueError("boom\nsecond line")

    with pytest.raises(ProfilingError, match=r"^kernel failed before tracing: ValueError: boom$"):
        capture_trace(broken, (jnp.ones(3),), tmp_path)
    # The profiler is free again.
    assert capture_trace(jnp.tanh, (jnp.ones(3),), tmp_path, runs=1).xplane_files


def test_runs_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ProfilingError, match="at least 1"):
        capture_trace(jnp.tanh, (jnp.ones(3),), tmp_path, runs=0)


def test_find_case_takes_matrix_ids_and_parses_adhoc_shapes() -> None:
    assert find_case(SPEC, CASE).id == CASE
    adhoc = find_case(SPEC, "matmul/B1-M256-K512-N64/bfloat16")
    assert dict(adhoc.params) == {"B": 1, "M": 256, "K": 512, "N": 64}
    assert adhoc.dtype == "bfloat16"


@pytest.mark.parametrize(
    ("case_id", "message"),
    [
        ("gla/B1-M128-K128-N128/float32", "is not matmul/<params>/<dtype>"),
        ("matmul/M128-K128-N128/float32", "takes parameters B-M-K-N"),
        ("matmul/B1-Mx-K128-N128/float32", "must look like"),
        ("matmul/B1-M128-K128-N128/int8", "no dtype 'int8'"),
    ],
)
def test_find_case_rejects_bad_ids(case_id: str, message: str) -> None:
    with pytest.raises(SelectionError, match=message):
        find_case(SPEC, case_id)


def test_viewer_commands_quote_the_log_dir() -> None:
    xprof, tensorboard = viewer_commands(Path("/tmp/my traces"))
    assert xprof == "xprof --logdir='/tmp/my traces' --port=8791"
    assert tensorboard == "tensorboard --logdir='/tmp/my traces'"
