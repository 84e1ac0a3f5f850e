"""Manual copies the body waits on with nothing to hide them (issue 39).

A copy overlaps the work issued between its start and its wait: an ``async_copy`` started
before a dot and waited after it costs nothing past the dot; a ``sync_copy`` (start, then
wait) and a write started after the step's last dot and waited at its end (tokamax's fused
loss backward) stall the step for their bytes at HBM bandwidth."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from ci_bench.measure.model import analyze_case
from ci_bench.measure.model.chips import chip
from tests.test_model import ADHOC, _adhoc

N = 512
COPY = N * N * 4  # the (N, N) float32 block copied from HBM
F32 = jnp.float32


def _kernel(order: str):
    """x (in HBM) copied into VMEM and multiplied by y; ``order`` says where the copy's
    start and wait sit around the dot."""

    def body(x_hbm, y_ref, o_ref, x_vmem, sem):
        copy = pltpu.make_async_copy(x_hbm, x_vmem, sem)
        if order == "sync":  # the same dot as the others (a float32 operand costs more)
            pltpu.sync_copy(x_hbm, x_vmem)
            o_ref[...] = jnp.dot(y_ref[...], y_ref[...], preferred_element_type=F32)
            o_ref[...] += x_vmem[...]
        elif order == "overlapped":
            copy.start()
            o_ref[...] = jnp.dot(y_ref[...], y_ref[...], preferred_element_type=F32)
            copy.wait()
            o_ref[...] += x_vmem[...]
        else:  # "after the dot, in a branch": started when the work is done, waited at the end
            o_ref[...] = jnp.dot(y_ref[...], y_ref[...], preferred_element_type=F32)

            @pl.when(pl.program_id(0) >= 0)
            def _():
                copy.start()

            copy.wait()

    def fn(x, y):
        return pl.pallas_call(
            body,
            out_shape=jax.ShapeDtypeStruct((N, N), jnp.float32),
            grid=(1,),
            in_specs=[
                pl.BlockSpec(memory_space=pl.ANY),
                pl.BlockSpec((N, N), lambda i: (0, 0)),
            ],
            out_specs=pl.BlockSpec((N, N), lambda i: (0, 0)),
            scratch_shapes=[pltpu.VMEM((N, N), jnp.float32), pltpu.SemaphoreType.DMA(())],
        )(x, y)

    return fn


def _make(case, key):
    return jnp.ones((N, N), F32), jnp.ones((N, N), jnp.bfloat16)


def _modelled_us(order: str) -> float:
    model = analyze_case(_adhoc(_kernel(order), _make), ADHOC, ["v5e"])
    assert model.status == "ok", model.reason
    assert model.calls[0].manual_dma_bytes == COPY
    return model.chips["v5e"].modelled_us


@pytest.mark.parametrize("order", ["sync", "after the dot, in a branch"])
def test_a_copy_waited_with_no_work_since_its_start_adds_its_bytes(order):
    copy_us = COPY / chip("v5e").model_hbm_bytes_per_s * 1e6
    hidden = _modelled_us("overlapped")
    assert _modelled_us(order) == pytest.approx(hidden + copy_us, rel=1e-6)
