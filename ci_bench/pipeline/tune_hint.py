"""The lower role's tiling hint: for each case of a kernel that declares tunables, the
model's search (``ci-bench tune``'s, ``pipeline.tuning.search_case``) on the target chips,
bounded by config ``tune-hint-max-candidates`` and ``tune-hint-max-seconds``; per case and
chip the best config and the shipped default's, both modelled (docs/TUNE.md). A hint for
the comment, never a verdict: a search that fails is a line in the log, not a red check."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ci_bench.contract.spec import Case, KernelSpec
from ci_bench.measure.kernel_process import KernelCodeError, KernelProcess
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


# One case's search: its result, a line saying why it was not searched, or None (the kernel
# declares no tunables).
Search = Callable[[Case], TunedCase | str | None]


def search_here(request: Request, specs: Mapping[str, KernelSpec], chips: Sequence[str]) -> Search:
    """The search in this process, on SPECs imported here (``ci-bench tune``'s own use)."""

    def search(case: Case) -> TunedCase | str | None:
        tunables = specs[case.kernel].tunables
        if tunables is None:
            return None
        limit = request.config.tune_hint_max_candidates
        if tunables.size > limit:
            return (
                f"tiling hint: {case.id}: {tunables.size} candidates, over "
                f"tune-hint-max-candidates ({limit}): not searched"
            )
        tuned, _ = search_case(
            specs[case.kernel],
            tunables,
            case,
            chips,
            seed=request.harness.seed,
            factor=request.harness.cost_model_factor,
        )
        return tuned

    return search


def search_in_worker(
    modules: Sequence[str], root: str, request: Request, chips: Sequence[str], case: Case
) -> TunedCase | str | None:
    """A worker's side of ``worker_search``: the head's SPECs imported there."""
    from ci_bench.contract.registry import load_kernels

    specs = load_kernels(modules, Path(root))
    return search_here(request, specs, chips)(case)


def worker_search(process: KernelProcess, request: Request, chips: Sequence[str]) -> Search:
    """The search in the head's worker (the lower role): a hang or crash there is the
    kernel's error, said to be the head's."""
    modules, root = tuple(request.modules), str(request.config.root)

    def search(case: Case) -> TunedCase | str | None:
        try:
            answer = process.call(
                "ci_bench.pipeline.tune_hint:search_in_worker",
                modules,
                root,
                request,
                tuple(chips),
                case,
                what=f"kernel {case.kernel}",
                doing="searched for a tiling",
            )
        except KernelCodeError as exc:
            if exc.how == "failed":
                raise RuntimeError(exc.cause) from None  # a failed search: a line, no error
            raise exc.on("the head's") from None
        return (
            answer
            if answer is None or isinstance(answer, str)
            else TunedCase.model_validate(answer)
        )

    return search


def tiling_hints(
    request: Request,
    cases: Sequence[Case],
    chips: Sequence[str],
    progress: Callable[[str], None],
    search: Search,
) -> list[TilingHint]:
    """The search for every case whose kernel declares tunables, within the config's caps
    (none when ``tune-hint`` is 0 or no chip is targeted)."""

    config = request.config
    if not config.tune_hint or not chips:
        return []
    deadline = time.monotonic() + config.tune_hint_max_seconds
    out: list[TilingHint] = []
    for case in cases:
        if time.monotonic() > deadline:
            progress(f"tiling hint: tune-hint-max-seconds spent; {case.id} and later not searched")
            break
        try:
            tuned = search(case)
        except KernelCodeError:
            raise  # the head's kernel hung or crashed: its error, not a hint's
        except Exception as exc:  # a hint, never a failure of the lowering check
            progress(f"tiling hint: {case.id}: the search failed: {one_line(exc)}")
            continue
        if isinstance(tuned, str):
            progress(tuned)
        elif tuned is not None:
            out += hints_of(tuned, chips)
    return out
