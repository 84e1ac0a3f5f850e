"""What a manual copy costs beyond its bytes (model revision 7).

On a TPU v5e a loop whose iterations each wait on p small copies started one iteration
ahead (jax's paged attention's pattern) runs 0.178 µs an iteration at p = 1 and 9.4 ns more
per copy, and the copy's round trip hides behind enough work after the wait
(benchmarks/tpu_microbench_dma.py). The model charges each wait to the scalar core and
takes an iteration that waits to last at least a round trip unless its work hides it."""

from __future__ import annotations

import sys

import pytest

from ci_bench.measure.model import analyze_case
from ci_bench.measure.model.chips import DMA_ROUND_TRIP_US, DMA_WAIT_US, STEP_OVERHEAD_US
from tests.conftest import REPO
from tests.test_model import ADHOC, _adhoc

sys.path.insert(0, str(REPO / "benchmarks"))
from tpu_microbench_dma import gather_call, loop_call  # the microbenchmark's own kernels

ITERATIONS = 8
ROWS = 16  # an (16, 128) float32 chunk: 8 KiB, the microbenchmark's size


def _model(copies: int, work: int):
    """The benchmark's loop: ITERATIONS iterations, each starting the next one's ``copies``
    chunks in a ``pl.when`` and waiting on its own, then ``work`` dependent multiply-adds."""
    call, args = loop_call(ITERATIONS, copies, ROWS, work)
    model = analyze_case(_adhoc(lambda *a: call(*a), lambda case, key: args), ADHOC, ["v5e"])
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


def test_a_copy_whose_source_the_scalar_core_loads_costs_what_a_computed_one_does():
    """jax's paged attention reads each copy's page from a table in SMEM. On a v5e that
    costs 1-3 ns a copy beyond a computed source (``tpu_microbench_dma.py gather``), so the
    model reads the table (scalar prefetch, real values) and prices both alike: every copy
    once, the same time."""
    figures = []
    for from_table in (False, True):
        call, args = gather_call(ITERATIONS, 4, 8, from_table)
        model = analyze_case(_adhoc(lambda *a, c=call: c(*a), lambda case, key, a=args: a),
                             ADHOC, ["v5e"])  # fmt: skip
        assert model.status == "ok", model.reason
        assert model.calls[0].manual_dma_bytes == ITERATIONS * 4 * 8 * 128 * 4
        figures.append(model.chips["v5e"].modelled_us)
    assert figures[0] == figures[1]
