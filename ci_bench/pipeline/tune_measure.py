"""``tune --measure K``: the model's top K on this machine's chip and the default, timed in
interleaved rounds in one process (the harness's ``time_interleaved``), each judged against
the default with the A/B's statistics: the median of paired ratios, its bootstrap interval
and the one-sided signed-rank p-value that it is faster.

On a CPU the command refuses before anything runs (Pallas interpret-mode times are not
kernel performance); tests force it to check the plumbing.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.contract.tunables import Tunables, with_subject
from ci_bench.pipeline.request import Request
from ci_bench.schema.tune import Current, Measured, NotCompiled, TunedCase
from ci_bench.text import one_line

Progress = Callable[[str], None]


TIES_MAX = 32  # the most candidates one tie at the cut adds to --measure K


def top_indices(tuned: TunedCase, chip: str | None, k: int) -> list[int]:
    """The model's best ``k`` programs on ``chip`` (the first chip ranked when None), and
    every candidate tied with the last of them (sharing its rank, up to ``TIES_MAX`` in
    all): a cut through a tie would be the enumeration's choice, not the model's. One
    candidate per program: configs that trace to the same program (``same_as``: a tile
    larger than its dimension cut to its share) time the same code."""
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
            distinct, programs = [], set()
            for r, i in ranked:
                program = tuned.candidates[i].same_as
                program = i if program is None else program
                if program not in programs:
                    programs.add(program)
                    distinct.append((r, i))
            last = distinct[: max(1, k)][-1][0]
            tied = [i for r, i in distinct if r <= last]
            return tied[: max(k, TIES_MAX)]
    return []


def _compiled(spec: KernelSpec, case: Case, seed: int) -> Callable[[], Any]:
    """The case's workload compiled for this chip before anything is timed: a config the
    compiler refuses raises here, not in the middle of the interleaved rounds."""
    import jax

    from ci_bench.measure.modes import concrete_workload

    work = concrete_workload(spec, case, seed=seed)
    compiled = jax.jit(work.fn).lower(*work.args).compile()
    return lambda: compiled(*work.args)


def _compile_chosen(
    spec: KernelSpec,
    tunables: Tunables,
    case: Case,
    tuned: TunedCase,
    order: Sequence[int],
    want: int,
    seed: int,
    progress: Progress,
) -> tuple[list[int], list[Callable[[], Any]], list[NotCompiled]]:
    """Compile candidates in the model's order until ``want`` compiled (the default
    always tried too): their indices and callables, and the ones that did not compile."""
    chosen: list[int] = []
    fns: list[Callable[[], Any]] = []
    failed: list[NotCompiled] = []
    default = tuned.default_index
    for index in [*order, *([default] if default is not None and default not in order else [])]:
        if len(chosen) >= want and index != default:
            continue
        config = tuned.candidates[index].config
        try:
            fn = _compiled(with_subject(spec, tunables.implementation(config)), case, seed)
        except Exception as exc:  # the compiler's refusal: recorded, the next one measured
            reason = one_line(f"{type(exc).__name__}: {exc}")[:300]
            failed.append(NotCompiled(config=config, default=index == default, error=reason))
            progress(f"  {case.id}: {dict(config)} does not compile here: {reason}")
            continue
        chosen.append(index)
        fns.append(fn)
    return chosen, fns, failed


def measure_top(
    request: Request,
    spec: KernelSpec,
    tunables: Tunables,
    case: Case,
    tuned: TunedCase,
    k: int,
    progress: Progress,
) -> TunedCase:
    """``tuned`` with the top ``k`` and the default measured (``measured``): each compiled
    first (one that does not is ``not_compiled``, and the next in the model's ranking takes
    its place), then timed in interleaved rounds by the configured timer (the platform's
    default: device time on a TPU). The kernel's own subject, as it runs today, is timed in
    the same rounds (``current``), so a write never replaces what runs with something
    slower."""
    import jax

    from ci_bench.measure.chip import this_chip
    from ci_bench.measure.harness import time_interleaved
    from ci_bench.measure.timers import default_timer, timed_rounds

    chip = this_chip()
    top = top_indices(tuned, chip, k)
    if len(top) > k:
        progress(f"  {case.id}: {len(top) - k} more tie with the model's top {k}: timed too")
    ranked = top + [i for i in top_indices(tuned, chip, len(tuned.candidates)) if i not in top]
    seed = request.harness.seed
    chosen, fns, failed = _compile_chosen(
        spec, tunables, case, tuned, ranked, len(top), seed, progress
    )
    tuned = tuned.model_copy(update={"not_compiled": failed})
    if not chosen:
        progress(f"  {case.id}: nothing to measure (no candidate lowers, fits and compiles)")
        return tuned
    current = _current(spec, case, seed, progress)
    timer = request.harness.timer or default_timer(jax.default_backend())
    progress(f"  {case.id}: timing {len(fns)} configs interleaved ({timer})")
    fns = fns + ([current] if current is not None else [])
    configs = [tuned.candidates[i].config for i in chosen]
    samples = timed_rounds(
        timer,
        time_interleaved,
        fns,
        (),
        warmup=request.harness.warmup,
        repeats=request.harness.repeats,
        rng=random.Random(seed),
    ).samples
    base = samples[chosen.index(tuned.default_index)] if tuned.default_index in chosen else None
    kind = jax.devices()[0].device_kind
    now = None
    if current is not None:
        times = samples[-1]
        now = Current(
            median_ms=statistics.median(times) * 1000, samples=len(times), device_kind=kind
        )
    measured = [
        _measured(config, times, base, index == tuned.default_index, kind)
        for config, times, index in zip(configs, samples[: len(chosen)], chosen, strict=True)
    ]
    return tuned.model_copy(update={"measured": measured, "current": now})


def _current(spec: KernelSpec, case: Case, seed: int, progress: Progress) -> Callable | None:
    """The kernel's subject as it runs now (its tuned file as it stands), compiled; None,
    said, when it does not compile: then only the candidates are compared."""
    try:
        return _compiled(spec, case, seed)
    except Exception as exc:  # a subject that fails here fails its own runs: said, not fatal
        reason = one_line(f"{type(exc).__name__}: {exc}")[:300]
        progress(f"  {case.id}: the subject as it runs now does not compile here: {reason}")
        return None


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
