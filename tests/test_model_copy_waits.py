"""What a manual copy costs beyond its bytes (model revision 7).

On a TPU v5e a loop whose iterations each wait on p small copies started one iteration
ahead (jax's paged attention's pattern) runs 0.178 µs an iteration at p = 1 and 9.4 ns more
per copy, and the copy's round trip hides behind enough work after the wait
(benchmarks/tpu_microbench_dma.py). The model charges each wait to the scalar core and
takes an iteration that waits to last at least a round trip unless its work hides it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from ci_bench.measure.model import analyze_case
from ci_bench.measure.model.chips import DMA_ROUND_TRIP_US, DMA_WAIT_US, STEP_OVERHEAD_US
from tests.test_model import ADHOC, _adhoc

ITERATIONS = 8
ROWS = 16  # an (16, 128) float32 chunk: 8 KiB, the microbenchmark's size


def _loop(copies: int, work: int):
    """ITERATIONS iterations, each starting the next one's ``copies`` chunks and waiting
    on its own, then ``work`` dependent multiply-adds on an (8, 128) tile."""

    def body(src_hbm, o_ref, buf, sems):
        def copy(it, slot, c):
            return pltpu.make_async_copy(
                src_hbm.at[it * copies + c], buf.at[slot, c], sems.at[slot, c]
            )

        for c in range(copies):
            copy(0, 0, c).start()

        def step(it, acc):
            slot = it % 2

            @pl.when(it + 1 < ITERATIONS)
            def _():
                for c in range(copies):
                    copy(it + 1, 1 - slot, c).start()

            for c in range(copies):
                copy(it, slot, c).wait()
            acc = acc + buf[slot, 0, :8, :]
            for _ in range(work):
                acc = acc * 1.0001 + 0.5
            return acc

        o_ref[...] = jax.lax.fori_loop(0, ITERATIONS, step, jnp.zeros((8, 128), jnp.float32))

    def fn(src):
        return pl.pallas_call(
            body,
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((8, 128), lambda: (0, 0)),
            out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
            scratch_shapes=[
                pltpu.VMEM((2, copies, ROWS, 128), jnp.float32),
                pltpu.SemaphoreType.DMA((2, copies)),
            ],
        )(src)

    return fn


def _model(copies: int, work: int):
    def make(case, key):
        return (jnp.ones((ITERATIONS * copies, ROWS, 128), jnp.float32),)

    model = analyze_case(_adhoc(_loop(copies, work), make), ADHOC, ["v5e"])
    assert model.status == "ok", model.reason
    return model


@pytest.mark.parametrize("copies", [1, 4])
def test_each_wait_costs_the_scalar_core_and_an_idle_iteration_a_round_trip(copies):
    model = _model(copies, work=0)
    figure = model.chips["v5e"]
    # Every copy's bytes, once: the waits add time, never bytes.
    assert model.calls[0].manual_dma_bytes == ITERATIONS * copies * ROWS * 128 * 4
    waits = ITERATIONS * copies * DMA_WAIT_US
    # Next to no work per iteration: each of the ITERATIONS rounds is a full round trip.
    round_trips = ITERATIONS * DMA_ROUND_TRIP_US - max(figure.compute_us, figure.vector_us)
    assert figure.vector_us < ITERATIONS * DMA_ROUND_TRIP_US / 4
    assert figure.overhead_us == pytest.approx(STEP_OVERHEAD_US + waits + round_trips)


def test_work_after_the_wait_hides_the_round_trip_but_not_the_waits():
    model = _model(copies=4, work=1024)
    figure = model.chips["v5e"]
    assert figure.vector_us > ITERATIONS * DMA_ROUND_TRIP_US  # more work than round trips
    waits = ITERATIONS * 4 * DMA_WAIT_US
    assert figure.overhead_us == pytest.approx(STEP_OVERHEAD_US + waits)
    assert figure.modelled_us >= figure.vector_us + figure.overhead_us - 1e-9
