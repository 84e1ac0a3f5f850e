"""The lower role's tiling hint: for each case of a kernel that declares tunables, the
model's search (``ci-bench tune``'s, ``pipeline.tuning.search_case``) on the target chips,
bounded by config ``tune-hint-max-candidates`` and ``tune-hint-max-seconds``; per case and
chip the best config and the shipped default's, both modelled (docs/TUNE.md). A hint for
the comment, never a verdict: a search that fails is a line in the log, not a red check."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.pipeline.request import Request
from ci_bench.pipeline.tuning import search_case
from ci_bench.schema.lowering import TilingHint
from ci_bench.schema.tune import TunedCase
from ci_bench.text import one_line


def hints_of(tuned: TunedCase, chips: Sequence[str]) -> list[TilingHint]:
    """Per chip, the best candidate and the default, where both are modelled as it; a best
    that is a tie carries the whole set (never one config the enumeration chose), and none
    when the default is in it."""
    if tuned.default_index is None:
        return []
    default = tuned.candidates[tuned.default_index]
    out = []
    for chip in chips:
        if chip not in tuned.best or chip not in default.chips:
            continue
        best = tuned.candidates[tuned.best[chip]]
        best_us, default_us = best.chips[chip].modelled_us, default.chips[chip].modelled_us
        tied = tuned.tied.get(chip, [])
        if tuned.default_index in tied:
            continue  # the default ties with the best: the model sees nothing faster
        if best_us > 0 and default_us > 0:
            out.append(
                TilingHint(
                    case=tuned.id,
                    chip=chip,
                    config=dict(best.config),
                    modelled_us=best_us,
                    default=dict(default.config),
                    default_us=default_us,
                    tied=[dict(tuned.candidates[i].config) for i in tied],
                    tie_knobs=tuned.tie_knobs.get(chip, []),
                )
            )
    return out


def tiling_hints(
    request: Request,
    specs: Mapping[str, KernelSpec],
    cases: Sequence[Case],
    chips: Sequence[str],
    progress: Callable[[str], None],
) -> list[TilingHint]:
    """The search for every case whose kernel declares tunables, within the config's caps
    (none when ``tune-hint`` is 0 or no chip is targeted)."""

    config = request.config
    if not config.tune_hint or not chips:
        return []
    deadline = time.monotonic() + config.tune_hint_max_seconds
    out: list[TilingHint] = []
    for case in cases:
        tunables = specs[case.kernel].tunables
        if tunables is None:
            continue
        if tunables.size > config.tune_hint_max_candidates:
            progress(
                f"tiling hint: {case.id}: {tunables.size} candidates, over "
                f"tune-hint-max-candidates ({config.tune_hint_max_candidates}): not searched"
            )
            continue
        if time.monotonic() > deadline:
            progress(f"tiling hint: tune-hint-max-seconds spent; {case.id} and later not searched")
            break
        try:
            tuned, _ = search_case(
                specs[case.kernel],
                tunables,
                case,
                chips,
                seed=request.harness.seed,
                factor=request.harness.cost_model_factor,
            )
        except Exception as exc:  # a hint, never a failure of the lowering check
            progress(f"tiling hint: {case.id}: the search failed: {one_line(exc)}")
            continue
        out += hints_of(tuned, chips)
    return out
