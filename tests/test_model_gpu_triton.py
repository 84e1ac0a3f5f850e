"""The GPU model reads a Triton call's HBM traffic from its body: the loads and stores a
program runs, in the branch it takes (``pl.when`` on ``program_id`` or on a bound read
from a scalar operand, as ragged kernels do), not from its block specs."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

from ci_bench.contract.spec import Case
from ci_bench.measure.model import analyze_case

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from gpu_op_spec import op_spec

ROWS, COLS, BLOCK = 1024, 256, 128
TILE = BLOCK * COLS * 2  # one program's bf16 block


def _half_kernel(bound_ref, x_ref, o_ref):
    """Programs below the bound (a scalar operand's value) double their rows; the others
    read the bound and exit."""

    @pl.when(pl.program_id(0) < bound_ref[...])
    def _():
        o_ref[...] = x_ref[...] * 2


def _call(x: jax.Array, active: int) -> jax.Array:
    bound = jnp.full((ROWS // BLOCK,), active, jnp.int32)
    return pl.pallas_call(
        _half_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(ROWS // BLOCK,),
        in_specs=[
            pl.BlockSpec((None,), lambda i: (i,)),
            pl.BlockSpec((BLOCK, COLS), lambda i: (i, 0)),
        ],
        out_specs=pl.BlockSpec((BLOCK, COLS), lambda i: (i, 0)),
        compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=1),
    )(bound, x)


def _model(active: int):
    spec = op_spec(
        "half",
        lambda x: _call(x, active),
        lambda c: [(c["M"], c["N"])],
        [{"M": ROWS, "N": COLS}],
        dtype="bfloat16",
    )
    return analyze_case(spec, Case("half", {"M": ROWS, "N": COLS}, "bfloat16"), ["h100"])


def test_only_programs_taking_the_branch_move_their_tiles():
    """3 of 8 programs pass the bound: 3 tiles read and 3 written, plus their 4-byte
    bounds (a program that exits at once is not counted); the block specs alone would say
    8 of each. The time is those bytes at H100's 3.35 TB/s."""
    for active in (3, 8):
        model = _model(active)
        chip = model.chips["h100"]
        assert chip.gpu is not None
        assert chip.gpu.programs == active
        assert chip.hbm_bytes == 2 * active * TILE + 4 * active
        assert chip.memory_us == pytest.approx(chip.hbm_bytes / 3.35e12 * 1e6)


def _triangle_kernel(x_ref, o_ref):
    """Program i sums row tiles i .. 2i of x (i + 1 of them: a causal-style loop bound)."""
    pid = pl.program_id(0)

    def body(j, acc):
        return acc + x_ref[pl.ds((pid + j) * BLOCK, BLOCK), :].astype(jnp.float32)

    acc = jax.lax.fori_loop(0, pid + 1, body, jnp.zeros((BLOCK, COLS), jnp.float32))
    o_ref[...] = acc.astype(o_ref.dtype)


def test_a_loop_bound_each_program_computes_counts_its_own_trips():
    """Programs 0..3 load 1, 2, 3 and 4 tiles (different rows each: no L2 sharing) and
    store one each; a constant trip count would say 4 x 4 loads or leave it partial."""
    programs = 4

    def call(x):
        return pl.pallas_call(
            _triangle_kernel,
            out_shape=jax.ShapeDtypeStruct((programs * BLOCK, COLS), x.dtype),
            grid=(programs,),
            in_specs=[pl.BlockSpec((ROWS, COLS), lambda i: (0, 0))],
            out_specs=pl.BlockSpec((BLOCK, COLS), lambda i: (i, 0)),
            compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=1),
        )(x)

    spec = op_spec("tri", call, lambda c: [(c["M"], c["N"])], [{"M": ROWS, "N": COLS}], "bfloat16")
    model = analyze_case(spec, Case("tri", {"M": ROWS, "N": COLS}, "bfloat16"), ["h100"])
    assert "trip count" not in (model.reason or "")  # partial only for its adds' vector work
    assert model.chips["h100"].hbm_bytes == (1 + 2 + 3 + 4) * TILE + programs * TILE


def test_gla_gpu_branch_is_triton_within_each_gpus_shared_memory():
    """GLA's GPU branch names Triton's params; its pipelined dot tiles (a lower bound on
    Triton's shared memory) fit the 227 KB a block may use on every GPU in the table."""
    from kernels.gla import SPEC as GLA

    case = Case("gla", {"B": 2, "T": 128, "H": 1, "K": 128, "V": 128}, "float32")
    model = analyze_case(GLA, case, ["h100", "b200"])
    for name in ("h100", "b200"):
        chip = model.chips[name]
        assert chip.gpu is not None
        assert chip.gpu.backend == "triton"
        assert chip.gpu.programs == 2  # grid (B, H): a fori_loop over the chunks
        assert 0 < chip.gpu.smem_per_program_bytes <= 227 * 1024
        assert chip.vmem_warning is None


def test_the_busiest_sm_is_a_lower_bound_on_any_schedule():
    """133 equal programs on 132 SMs: one SM runs two. Unequal ones: no SM can finish
    before the largest program, nor before its share of the total."""
    from ci_bench.measure.model.gpuwaves import busiest_sm

    assert busiest_sm(np.full(133, 5.0), 132) == 10.0
    assert busiest_sm(np.array([10.0, 1.0, 1.0]), 2) == 10.0
    assert busiest_sm(np.array([3.0, 3.0, 3.0, 1.0]), 2) == 5.0  # total 10 over 2 SMs
    assert busiest_sm(np.array([]), 4) == 0.0
