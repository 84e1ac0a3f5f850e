"""``ci-bench tune``'s search: every candidate config of a case traced, modelled and lowered
*as each target TPU chip* on this CPU, then ranked by modelled time (docs/TUNE.md).

The model is used only through its entry point (``ci_bench.measure.model.analyze_case``) and
the lowering check through ``lower_case(..., chip=)``, as ``analyze`` and ``lower`` use them.
Two caches keep a search of a thousand candidates near a minute: a candidate whose traced
programs (one per chip, traced as analyze traces them: every chip only when jax asked for
the chip) are identical to an earlier one's reuses its figures, and a lowering serves every
chip when jax did not ask for the chip while lowering the first and the last alike.
A failure that blames this machine (``is_host_failure``) is said as such, never as the
kernel's; a partial model (parts not modelled) is shown unranked with its reason.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ci_bench import __version__
from ci_bench.contract.spec import Case, KernelSpec, SpecError
from ci_bench.contract.tunables import Tunables, Values, with_subject
from ci_bench.errors import InputError
from ci_bench.pipeline.request import Request
from ci_bench.pipeline.session import cases_for
from ci_bench.pipeline.tune_measure import measure_top
from ci_bench.pipeline.tune_ties import rank
from ci_bench.schema.model import CaseModel
from ci_bench.schema.tune import Candidate, CandidateChip, TunedCase, TuneMeta, TuneReport
from ci_bench.text import one_line

Progress = Callable[[str], None]


@dataclasses.dataclass
class _Memo:
    """Figures per traced program, for candidates whose programs are identical."""

    by_program: dict[str, int] = dataclasses.field(default_factory=dict)
    traced: int = 0
    reused: int = 0


def _program(spec: KernelSpec, case: Case, seed: int) -> str:
    """The case's timed program for the subject, as jaxpr text."""
    import jax

    from ci_bench.measure.modes import case_workload

    work = case_workload(spec, case, seed=seed)
    flat, tree = jax.tree.flatten(work.args)
    return str(jax.make_jaxpr(lambda *xs: work.fn(*jax.tree.unflatten(tree, xs)))(*flat))


class _ChipError(Exception):
    """A trace or lowering as ``chip`` failed with ``error`` (kept whole for its message)."""

    def __init__(self, chip: str | None, error: BaseException) -> None:
        super().__init__(one_line(error))
        self.chip, self.error = chip, error


def _per_chip(chips: Sequence[str], once: Callable[[str | None], str]) -> dict[str | None, str]:
    """``once(chip)`` as each chip, as few times as the model's own rule allows
    (``measure.model._traces``: every chip when jax asked for the chip, else the first and
    the last, and the rest only when those two differ)."""
    from ci_bench.measure.model import _chip_queries, _traces
    from ci_bench.measure.model.aschip import as_chip

    def as_(name: str | None) -> tuple[str, bool]:
        before = _chip_queries()
        try:
            with as_chip(name):
                text = once(name)
        except Exception as exc:
            raise _ChipError(name, exc) from exc
        return text, before is None or _chip_queries() != before

    return _traces(list(chips) or [None], as_)


def _programs_key(spec: KernelSpec, case: Case, seed: int, chips: Sequence[str]) -> str:
    """The cache key: a digest of the case's programs traced as each chip."""
    texts = _per_chip(chips, lambda _chip: _program(spec, case, seed))
    digest = hashlib.sha256()
    for name in list(chips) or [None]:
        digest.update(texts[name].encode() + b"\0")
    return digest.hexdigest()


def _from_model(
    values: Values, model: CaseModel, chips: Sequence[str], is_default: bool
) -> Candidate:
    if model.status == "partial":  # lower bounds only: never ranked as if whole (issue 29)
        return Candidate(
            config=dict(values), default=is_default, why_not=f"unranked: {model.reason}"
        )
    if model.status != "ok":
        return Candidate(
            config=dict(values), default=is_default, why_not=f"not modelled: {model.reason}"
        )
    per_chip = {
        name: CandidateChip(
            fits=c.fits,
            why_not=c.why_not,
            modelled_us=c.modelled_us,
            bound=c.bound,
            bytes=c.hbm_bytes or model.hbm_bytes or 0,
        )
        for name, c in model.chips.items()
        if name in chips
    }
    return Candidate(
        config=dict(values),
        default=is_default,
        steps=model.grid_steps,
        bytes=model.hbm_bytes,
        vmem_bytes=model.vmem_bytes,
        flops=model.flops,
        chips=per_chip,
    )


def _lowered(spec: KernelSpec, case: Case, seed: int, candidate: Candidate) -> Candidate:
    """The candidate lowered for TPU as each chip it fits (``lower_case(..., chip=)``): per
    chip ``lowers`` (None: this machine's fault, ``host_error``), and the candidate's
    ``lowers`` (False if any chip's lowering is the kernel's fault) and first error."""
    from ci_bench.measure.lowering import lower_case

    fitting = [name for name, c in candidate.chips.items() if c.fits]
    each: dict[str | None, Any] = {}

    def lower(name: str | None) -> str:
        each[name] = lower_case(spec, case, "tpu", seed, chip=name)
        return f"{each[name].status}\0{each[name].kind}\0{each[name].custom_calls}"

    statuses = _per_chip(fitting, lower)
    chips = dict(candidate.chips)
    for name in fitting:
        done = each.get(name) or next(v for k, v in each.items() if statuses[k] == statuses[name])
        lowers = None if done.status == "host_error" else done.status == "ok"
        chips[name] = chips[name].model_copy(
            update={"lowers": lowers, "lowering_error": done.error}
        )
    errors = [c for c in chips.values() if c.lowers is False]
    hosts = [c for c in chips.values() if c.fits and c.lowers is None]
    return candidate.model_copy(
        update={
            "chips": chips,
            "lowers": False if errors else (None if hosts else True),
            "lowering_error": (errors or hosts)[0].lowering_error if errors or hosts else None,
            "host_error": bool(hosts) and not errors,
        }
    )


def _evaluate(
    spec: KernelSpec,
    tunables: Tunables,
    case: Case,
    values: Values,
    chips: Sequence[str],
    seed: int,
    factor: float,
    found: list[Candidate],
    memo: _Memo,
) -> Candidate:
    """One candidate: rejected (and why), or traced, modelled and lowered (or reused)."""
    from ci_bench.measure.model import analyze_case

    is_default = dict(values) == dict(tunables.default)
    why = tunables.rejects(values, case.params)
    if why is not None:
        return Candidate(config=dict(values), default=is_default, why_not=why)
    try:
        candidate_spec = with_subject(spec, tunables.implementation(values))
        program = _programs_key(candidate_spec, case, seed, chips)
    except Exception as exc:  # a candidate that does not trace is a finding, not a crash
        return Candidate(
            config=dict(values),
            default=is_default,
            why_not=_trace_failure(exc),
            host_error=_host(exc),
        )
    memo.traced += 1
    earlier = memo.by_program.get(program)
    if earlier is not None:
        memo.reused += 1
        same = found[earlier]
        return same.model_copy(
            update={"config": dict(values), "default": is_default, "same_as": earlier}
        )
    model = analyze_case(candidate_spec, case, chips, seed=seed, flops_factor=factor)
    candidate = _from_model(values, model, chips, is_default)
    if candidate.why_not is None and any(c.fits for c in candidate.chips.values()):
        # Lowered as each chip it fits; not tried for a candidate that fits none of them.
        candidate = _lowered(candidate_spec, case, seed, candidate)
    memo.by_program[program] = len(found)
    return candidate


def _host(exc: BaseException) -> bool:
    """Whether jax's error (as a chip, unwrapped) blames this machine, not the kernel."""
    from ci_bench.measure.lowering import is_host_failure

    return is_host_failure(one_line(exc.error if isinstance(exc, _ChipError) else exc))


def _trace_failure(exc: BaseException) -> str:
    """Why a candidate did not trace: the kernel's fault, or (``is_host_failure``) this
    machine's, said as such."""
    where = f" as {exc.chip}" if isinstance(exc, _ChipError) and exc.chip else ""
    error = exc.error if isinstance(exc, _ChipError) else exc
    if _host(exc):
        return f"host error: tracing{where} failed on this machine: {one_line(error)}"
    return f"does not trace{where}: {one_line(error)}"


def search_case(
    spec: KernelSpec,
    tunables: Tunables,
    case: Case,
    chips: Sequence[str],
    *,
    seed: int = 42,
    factor: float = 2.0,
    progress: Progress = lambda line: None,
) -> tuple[TunedCase, _Memo]:
    """Every candidate of ``tunables`` for ``case``, evaluated and ranked per chip."""
    start = time.perf_counter()
    memo = _Memo()
    found: list[Candidate] = []
    total = tunables.size
    step = max(1, total // 10)
    for index, values in enumerate(tunables.candidates(), start=1):
        found.append(_evaluate(spec, tunables, case, values, chips, seed, factor, found, memo))
        if index % step == 0 or index == total:
            progress(f"  {case.id}: {index}/{total} candidates")
    ranking = rank(found, chips)
    ranked = ranking.candidates
    default_index = next((i for i, c in enumerate(ranked) if c.default), None)
    tuned = TunedCase(
        id=case.id,
        kernel=spec.name,
        version=spec.version,
        mode=case.mode,
        params=dict(case.params),
        dtype=case.dtype,
        space=total,
        candidates=ranked,
        best=ranking.best,
        tied=ranking.tied,
        tie_knobs=ranking.tie_knobs,
        default_index=default_index,
        seconds=time.perf_counter() - start,
    )
    return tuned, memo


def parse_values(items: Sequence[str]) -> dict[str, tuple[int | str, ...]]:
    """``--values block_m=128,256`` -> {"block_m": (128, 256)}; ints where they parse."""
    from ci_bench.text import split_list

    out: dict[str, tuple[int | str, ...]] = {}
    for item in items:
        name, sep, rest = item.partition("=")
        words = split_list(rest)
        if not sep or not name.strip() or not words:
            raise InputError(f"--values wants NAME=V1,V2,..., got {item!r}")
        out[name.strip()] = tuple(int(w) if w.lstrip("-").isdigit() else w for w in words)
    return out


def added_defaults(tunables: Tunables, overrides: Mapping[str, Sequence[Any]]) -> list[str]:
    """What ``--values`` searched beyond what it named: the default's value of each knob it
    left out (``Tunables.with_values``: the default config always stays a candidate)."""
    return [
        f"--values {name}: searched {', '.join(map(str, values))} and the default's "
        f"{tunables.default[name]} (the default config always stays a candidate)"
        for name, values in overrides.items()
        if name in tunables.default and tunables.default[name] not in values
    ]


def tunables_of(spec: KernelSpec, overrides: Mapping[str, Sequence[Any]]) -> Tunables | None:
    """The SPEC's tunables with ``--values`` applied (None: it declares none)."""
    if spec.tunables is None:
        return None
    return spec.tunables.with_values(overrides) if overrides else spec.tunables


def tune_cases(
    request: Request,
    specs: Mapping[str, KernelSpec],
    chips: Sequence[str],
    overrides: Mapping[str, Sequence[Any]],
    progress: Progress,
    *,
    measure: int = 0,
    on_case: Callable[[TunedCase], None] | None = None,
) -> TuneReport:
    """Every selected case of a kernel with tunables, searched (and ``measure`` > 0: its
    top K and default timed on this machine's accelerator). ``on_case`` gets each case as
    it is done, so a run stopped part-way (a job's time limit) keeps what it measured."""
    import jax

    start = time.perf_counter()
    cases = cases_for(request.selection, specs)
    tunable = [c for c in cases if specs[c.kernel].tunables is not None]
    if not tunable:
        kernels = ", ".join(sorted({c.kernel for c in cases})) or "none"
        raise InputError(
            f"nothing to tune: no selected kernel declares tunables (selected: {kernels}; "
            "docs/KERNEL_CONTRACT.md, 'Tunables')"
        )
    for kernel in sorted({c.kernel for c in cases} - {c.kernel for c in tunable}):
        progress(f"{kernel}: declares no tunables, skipped")
    seed, factor = request.harness.seed, request.harness.cost_model_factor
    out, traced, reused = [], 0, 0
    for index, case in enumerate(tunable, start=1):
        spec = specs[case.kernel]
        try:
            tunables = tunables_of(spec, overrides)
        except SpecError as exc:
            raise InputError(f"--values: kernel {spec.name}: {exc}") from None
        assert tunables is not None
        progress(f"[{index}/{len(tunable)}] {case.id}: {tunables.size} candidates")
        tuned, memo = search_case(
            spec, tunables, case, chips, seed=seed, factor=factor, progress=progress
        )
        notes = added_defaults(tunables, overrides)
        if notes:
            tuned = tuned.model_copy(update={"notes": notes})
        if measure:
            tuned = measure_top(request, spec, tunables, case, tuned, measure, progress)
        out.append(tuned)
        if on_case is not None:
            on_case(tuned)
        traced, reused = traced + memo.traced, reused + memo.reused
    meta = TuneMeta(
        tool_version=__version__,
        jax=jax.__version__,
        chips=list(chips),
        seed=seed,
        seconds=time.perf_counter() - start,
        traced=traced,
        reused=reused,
    )
    return TuneReport(meta=meta, cases=out)
