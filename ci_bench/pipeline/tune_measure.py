"""``tune --measure K``: the model's top K on this machine's chip and the default, timed in
interleaved rounds in one process (the harness's ``time_interleaved``), each judged against
the default with the A/B's statistics: the median of paired ratios, its bootstrap interval
and the one-sided signed-rank p-value that it is faster.

On a CPU the command refuses before anything runs (Pallas interpret-mode times are not
kernel performance); tests force it to check the plumbing.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from ci_bench.contract.spec import PALLAS, Case, KernelSpec
from ci_bench.contract.tunables import Tunables
from ci_bench.pipeline.request import Request
from ci_bench.schema.tune import Measured, TunedCase

Progress = Callable[[str], None]


def with_subject(spec: KernelSpec, implementation: Callable[..., Any]) -> KernelSpec:
    """The SPEC with ``implementation`` as its subject, everything else unchanged."""
    if spec.subject == PALLAS:
        return dataclasses.replace(spec, pallas=implementation)
    if spec.subject in spec.variants:
        return dataclasses.replace(spec, variants={**spec.variants, spec.subject: implementation})
    return dataclasses.replace(spec, native=implementation)


TIES_MAX = 32  # the most candidates one tie at the cut adds to --measure K


def top_indices(tuned: TunedCase, chip: str | None, k: int) -> list[int]:
    """The model's best ``k`` on ``chip`` (the first chip ranked when None), and every
    candidate tied with the last of them (sharing its rank, up to ``TIES_MAX`` in all): a
    cut through a tie would be the enumeration's choice, not the model's."""
    chips = [chip] if chip else []
    chips += [c for c in tuned.best if c not in chips]
    for name in chips:
        ranked = [
            (c.chips[name].rank, i)
            for i, c in enumerate(tuned.candidates)
            if name in c.chips and c.chips[name].rank is not None
        ]
        if ranked:
            ranked.sort()
            last = ranked[: max(1, k)][-1][0]
            tied = [i for r, i in ranked if r <= last]
            return tied[: max(k, TIES_MAX)]
    return []


def _callable(spec: KernelSpec, case: Case, seed: int) -> Callable[[], Any]:
    import jax

    from ci_bench.measure.modes import concrete_workload

    work = concrete_workload(spec, case, seed=seed)
    fn = jax.jit(work.fn)
    return lambda: fn(*work.args)


def measure_top(
    request: Request,
    spec: KernelSpec,
    tunables: Tunables,
    case: Case,
    tuned: TunedCase,
    k: int,
    progress: Progress,
) -> TunedCase:
    """``tuned`` with the top ``k`` and the default measured (``measured``)."""
    import jax

    from ci_bench.measure.chip import this_chip
    from ci_bench.measure.harness import time_interleaved

    chosen = top_indices(tuned, this_chip(), k)
    if len(chosen) > k:
        progress(f"  {case.id}: {len(chosen) - k} more tie with the model's top {k}: timed too")
    if tuned.default_index is not None and tuned.default_index not in chosen:
        chosen.append(tuned.default_index)
    if not chosen:
        progress(f"  {case.id}: nothing to measure (no candidate lowers and fits)")
        return tuned
    seed = request.harness.seed
    configs = [tuned.candidates[i].config for i in chosen]
    fns = [_callable(with_subject(spec, tunables.implementation(c)), case, seed) for c in configs]
    progress(f"  {case.id}: timing {len(fns)} configs interleaved")
    samples = time_interleaved(
        fns,
        (),
        warmup=request.harness.warmup,
        repeats=request.harness.repeats,
        rng=random.Random(seed),
    )
    base = samples[chosen.index(tuned.default_index)] if tuned.default_index in chosen else None
    kind = jax.devices()[0].device_kind
    measured = [
        _measured(config, times, base, index == tuned.default_index, kind)
        for config, times, index in zip(configs, samples, chosen, strict=True)
    ]
    return tuned.model_copy(update={"measured": measured})


def _measured(
    config: dict, times: Sequence[float], base: Sequence[float] | None, is_default: bool, kind: str
) -> Measured:
    from ci_bench.judge.ab import signed_rank_p
    from ci_bench.judge.stats import bootstrap_ratio_ci

    ratio = low = high = p = None
    if base is not None and not is_default:
        ratio, low, high = bootstrap_ratio_ci(times, base)
        p = signed_rank_p([t / b for t, b in zip(times, base, strict=True) if b > 0], "faster")
    return Measured(
        config=config,
        default=is_default,
        median_ms=statistics.median(times) * 1000,
        samples=len(times),
        ratio=ratio,
        ci_low=low,
        ci_high=high,
        p_value=p,
        device_kind=kind,
    )
