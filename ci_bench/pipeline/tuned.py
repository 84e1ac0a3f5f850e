"""Tuned configs as files: ``tune --write`` keeps each chip's winner per case beside the
baselines, and ``check-spec`` validates what is there (format: docs/FORMATS.md, "Tuned
configs"). A kernel reads them at run time with ``ci_bench.spec.tuned_config``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import jax

from ci_bench import __version__
from ci_bench.contract.spec import Case, KernelSpec, SpecError
from ci_bench.contract.tuned import TUNED_VERSION, config_problem, tuned_path
from ci_bench.errors import InputError
from ci_bench.schema.tune import TunedCase, TunedEntry, TunedFile, TuneReport
from ci_bench.store.files import dump_model, read_model
from ci_bench.store.writer import atomic_write_text


def _measured_on(case: TunedCase, chip: str) -> list:
    from ci_bench.judge.model import runner_chip

    return [m for m in case.measured if runner_chip(m.device_kind) == chip]


def winner(case: TunedCase, chip: str) -> int | None:
    """The index to keep for ``chip``: the candidate measured fastest on that chip, the
    default among them (the chip's word over the model's: on a TPU v5e the model's unique
    best for a 16 x 128³ float32 matmul measured 3 % slower than the default), and None
    when the subject as it ran before was no slower (``kept_current``); unmeasured,
    the model's best, and None (nothing to write) when that best is a tie (issue 39): the
    model's pick would be the enumeration's."""
    if chip not in case.best:
        return None
    timed = {repr(m.config): m.median_ms for m in _measured_on(case, chip)}
    members = [i for i, c in enumerate(case.candidates) if repr(c.config) in timed]
    if members:
        best = min(members, key=lambda i: timed[repr(case.candidates[i].config)])
        return None if kept_current(case, chip) else best
    return None if chip in case.tied else case.best[chip]


def kept_current(case: TunedCase, chip: str) -> bool:
    """Whether the subject as it ran before the tune (``current``, measured on ``chip``)
    was at least as fast as every measured candidate: then nothing is written, and what
    runs stays (its entry, or the kernel's own fallback)."""
    from ci_bench.judge.model import runner_chip

    current, timed = case.current, _measured_on(case, chip)
    if current is None or not timed or runner_chip(current.device_kind) != chip:
        return False
    return current.median_ms <= min(m.median_ms for m in timed)


def _entry(case: TunedCase, chip: str) -> TunedEntry | None:
    index = winner(case, chip)
    if index is None:
        return None
    best = case.candidates[index]
    default = case.candidates[case.default_index] if case.default_index is not None else None
    measured = next((m for m in case.measured if m.config == best.config), None)
    default_measured = next((m for m in case.measured if m.default), None)
    return TunedEntry(
        params=case.params,
        dtype=case.dtype,
        mode=case.mode,
        config=best.config,
        default=default.config if default is not None else best.config,
        modelled_us=best.chips[chip].modelled_us,
        default_modelled_us=(
            default.chips[chip].modelled_us
            if default is not None and chip in default.chips
            else None
        ),
        measured=measured,
        default_measured=default_measured,
        candidates=max(1, case.space),
    )


def read_tuned(path: Path) -> TunedFile:
    """A tuned-configs file, validated; a bad one is a one-line InputError."""
    return read_model(path, TunedFile, what="tuned configs", schema_version=TUNED_VERSION)


def write_tuned(
    report: TuneReport,
    folder: Path,
    *,
    replace: bool = False,
    specs: Mapping[str, KernelSpec] | None = None,
) -> list[Path]:
    """One file per kernel version and chip; entries of other cases are kept, an entry for
    the same case is replaced only when ``replace`` (else a one-line InputError). With
    ``specs``, a file that already holds what check-spec refuses is never rewritten: the
    entries kept would carry its problems on, under a fresh date."""
    return write_tuned_cases(report.cases, report.meta.chips, folder, replace=replace, specs=specs)


def write_tuned_cases(
    cases: Sequence[TunedCase],
    chips: Sequence[str],
    folder: Path,
    *,
    replace: bool = False,
    specs: Mapping[str, KernelSpec] | None = None,
) -> list[Path]:
    """``write_tuned`` for some cases: ``tune --write`` writes each case as it is done."""
    groups: dict[tuple[str, str, str], dict[str, TunedEntry]] = {}
    for case in cases:
        for chip in chips:
            entry = _entry(case, chip)
            if entry is not None:
                groups.setdefault((case.kernel, case.version, chip), {})[case.id] = entry
    written = []
    for (kernel, version, chip), entries in groups.items():
        path = tuned_path(folder, kernel, version, chip)
        kept = _kept(path, set(entries), (specs or {}).get(kernel), replace)
        tuned = TunedFile(
            kernel=kernel,
            version=version,
            chip=chip,
            tool_version=__version__,
            jax=jax.__version__,
            updated=datetime.now(UTC),
            cases={**kept, **entries},
        )
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, dump_model(tuned), what="tuned configs")
        written.append(path)
    return written


def _kept(path: Path, ids: set[str], spec: KernelSpec | None, replace: bool) -> dict:
    """The entries of ``path`` a write keeps beside ``ids``; a one-line InputError when the
    file holds what check-spec refuses, or any of ``ids`` without ``replace``."""
    if not path.exists():
        return {}
    problems = file_problems(spec, path) if spec is not None else []
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InputError(
            f"{path} holds what check-spec refuses, not rewritten: {problems[0]}{more} "
            "(fix or remove the file, then write again)"
        )
    kept = dict(read_tuned(path).cases)
    clash = sorted(set(kept) & ids)
    if clash and not replace:
        raise InputError(
            f"{path} already holds {len(clash)} of these cases ({clash[0]}, ...): "
            "pass --force to replace their entries"
        )
    return kept


def check_writable(
    cases: Sequence[Case],
    chips: Sequence[str],
    folder: Path,
    specs: Mapping[str, KernelSpec],
    *,
    replace: bool = False,
) -> None:
    """What ``write_tuned_cases`` would refuse for ``cases``, refused before anything is
    measured: ``tune --write`` writes case by case, and a refusal after the first would
    stop the run with that case's measurement unsaved."""
    groups: dict[tuple[str, str], set[str]] = {}
    for case in cases:
        groups.setdefault((case.kernel, specs[case.kernel].version), set()).add(case.id)
    for chip in chips:
        for (kernel, version), ids in groups.items():
            _kept(tuned_path(folder, kernel, version, chip), ids, specs.get(kernel), replace)


def tuned_files(folder: Path, kernel: str, version: str) -> Iterator[Path]:
    """The kernel version's tuned-configs files in ``folder``, by chip."""
    if folder.is_dir():
        yield from sorted(folder.glob(f"{kernel}_v{version}.tuned.*.json"))


def tuned_problems(spec: KernelSpec, folder: Path) -> list[str]:
    """``check-spec``: each of the kernel's tuned files reads, names its kernel, version and
    chip as its file name does, and holds configs the SPEC's tunables accept."""
    problems: list[str] = []
    for path in tuned_files(folder, spec.name, spec.version):
        problems += file_problems(spec, path)
    return problems


def file_problems(spec: KernelSpec, path: Path) -> list[str]:
    """One tuned file against ``spec`` (``tuned_problems``'s rule for each file)."""
    from ci_bench.measure.model.chips import CHIP_NAMES

    chip = path.name.rsplit(".", 2)[-2]
    try:
        tuned = read_tuned(path)
    except InputError as exc:
        return [str(exc)]
    problems: list[str] = []
    if (tuned.kernel, tuned.version, tuned.chip) != (spec.name, spec.version, chip):
        problems.append(f"{path.name}: holds {tuned.kernel} v{tuned.version} on {tuned.chip}")
    if chip not in CHIP_NAMES:
        problems.append(f"{path.name}: unknown chip {chip!r} ({', '.join(CHIP_NAMES)})")
    if spec.tunables is None:
        return [*problems, f"{path.name}: the SPEC declares no tunables"]
    for case_id, entry in tuned.cases.items():
        try:
            case = Case(spec.name, entry.params, entry.dtype, entry.mode)
        except SpecError as exc:
            problems.append(f"{path.name}: {case_id}: {exc}")
            continue
        if case.id != case_id:
            problems.append(f"{path.name}: {case_id}: its params and dtype make {case.id}")
        # The run-time reader's check (contract.tuned), so both refuse the same files.
        why = config_problem(entry.config, spec.tunables.default, spec.tunables, case.params)
        if why is not None:
            problems.append(f"{path.name}: {case_id}: {why}")
    return problems


def release_tuned(specs: Mapping[str, KernelSpec], folder: Path, kernel: str | None) -> list[str]:
    """A release keeps the released versions' tuned configs with their baselines: each is
    validated (a broken one stops the release before anything is measured) and named in
    the promotion's summary."""
    lines, problems = [], []
    for name, spec in specs.items():
        if kernel is not None and name != kernel:
            continue
        problems += tuned_problems(spec, folder)
        lines += [f"tuned configs kept: {p.name}" for p in tuned_files(folder, name, spec.version)]
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InputError(f"tuned configs: {problems[0]}{more}")
    return lines


def release_tuned_in_worker(
    modules: Sequence[str], root: str, folder: Path, kernel: str | None
) -> list[str]:
    """``release_tuned`` on the head's SPECs imported in a worker (the tunables' configs
    are the kernel's code); its InputError comes back as the worker's one-line error."""
    from ci_bench.contract.registry import load_kernels

    return release_tuned(load_kernels(modules, Path(root)), folder, kernel)
