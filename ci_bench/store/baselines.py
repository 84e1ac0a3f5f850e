"""The baseline store: ``baselines/<kernel>_v<version>.json``, one entry per device.

Pure functions build and merge baseline documents; ``load``/``write`` are the file edge.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from ci_bench.errors import CiBenchError, ExitCode, InputError
from ci_bench.schema import (
    BASELINE_READABLE,
    BASELINE_SCHEMA_VERSION,
    BaselineEntry,
    BaselineFile,
    Lookup,
    Provenance,
    Results,
    version_key,
)
from ci_bench.schema.baseline import ANY_KERNEL
from ci_bench.store.baseline_text import baseline_text, check_readable_back
from ci_bench.store.files import (
    read_model,
    write_text,
)
from ci_bench.text import NAME, NAME_MAX, SEMVER


def baseline_path(folder: Path, kernel: str, version: str) -> Path:
    """The one file for a kernel version, derived only from validated names.

    A name outside the contract (``../../x``, an absolute path, a NUL byte) is refused, so
    nothing can be read or written outside ``folder``.
    """
    if not NAME.fullmatch(kernel):
        raise InputError(f"kernel name {kernel[:80]!r} is not a valid kernel name")
    if not SEMVER.fullmatch(version) or len(version) > NAME_MAX:
        raise InputError(f"kernel {kernel}: version {version[:80]!r} is not semver")
    path = folder / f"{kernel}_v{version}.json"
    assert path.parent == folder  # the patterns above admit no separator
    return path


def present(path: Path) -> bool:
    """Something is at ``path``: a file, a folder or a link (dangling or looping ones too).

    Only a path with nothing at all means "no baseline yet"; anything else is read and
    fails loudly if it is not a readable baseline file.
    """
    try:
        path.lstat()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise InputError(f"{path}: cannot inspect the baseline: {exc.strerror}") from None
    return True


def check_store(folder: Path) -> bool:
    """Whether the baselines folder exists; something else at its path is an error."""
    if not present(folder):
        return False
    if not folder.is_dir():
        raise InputError(f"{folder}: the baselines folder is not a directory")
    return True


def load_baseline(path: Path, kernel: str | None = None) -> BaselineFile:
    """Read and validate a baseline; a file of another kernel is an input error."""
    baseline = read_model(path, BaselineFile, what="baseline", schema_version=BASELINE_READABLE)
    if kernel is not None and baseline.kernel != kernel:
        raise InputError(f"{path}: kernel: holds {baseline.kernel!r}, expected {kernel!r}")
    expected = path.name
    if expected != f"{baseline.kernel}_v{baseline.version}.json":
        raise InputError(
            f"{path}: version: file name does not match its content "
            f"({baseline.kernel} v{baseline.version})"
        )
    return baseline


_FILE = re.compile(r"^(?P<kernel>[a-z][a-z0-9_]*)_v(?P<version>.+)\.json$")


def baseline_files(folder: Path) -> list[Path]:
    """Every baseline file in ``folder`` (``<kernel>_v<semver>.json``), sorted; the tuned
    configs beside them (``<kernel>_v<version>.tuned.<chip>.json``) and anything else are
    not baselines, however their names start."""
    try:
        names = sorted(p.name for p in folder.iterdir())
    except OSError as exc:
        raise InputError(f"{folder}: cannot list the baselines folder: {exc.strerror}") from None
    return [
        folder / name
        for name in names
        if (match := _FILE.fullmatch(name)) and SEMVER.fullmatch(match["version"])
    ]


def available_versions(folder: Path, kernel: str) -> list[str]:
    """Versions with a baseline file for ``kernel``, oldest first."""
    if not check_store(folder):
        return []
    found = []
    try:
        names = [p.name for p in folder.iterdir()]
    except OSError as exc:
        raise InputError(f"{folder}: cannot list the baselines folder: {exc.strerror}") from None
    for name in names:
        match = _FILE.fullmatch(name)
        if match and match["kernel"] == kernel and SEMVER.fullmatch(match["version"]):
            found.append(match["version"])
    return sorted(found, key=version_key)


def find_baseline(folder: Path, kernel: str, version: str, pinned: str | None = None) -> Lookup:
    """The file for ``version``, else the nearest lower version, else none.

    ``pinned`` (a dispatch input) forces one version and fails if its file is absent.
    """
    if pinned is not None:
        path = baseline_path(folder, kernel, pinned)
        if not present(path):
            raise InputError(f"{path}: baseline file not found (pinned version {pinned})")
        return Lookup(kernel, version, path, load_baseline(path, kernel), None)
    exact = baseline_path(folder, kernel, version)
    if check_store(folder) and present(exact):
        return Lookup(kernel, version, exact, load_baseline(exact, kernel), None)
    lower = [v for v in available_versions(folder, kernel) if version_key(v) < version_key(version)]
    if not lower:
        return Lookup(kernel, version, None, None, f"no baseline for {kernel} v{version} or older")
    chosen = lower[-1]
    path = baseline_path(folder, kernel, chosen)
    note = f"compared with v{chosen}: no baseline yet for v{version}"
    return Lookup(kernel, version, path, load_baseline(path, kernel), note)


class PromotionRefusedError(CiBenchError):
    """Promotion would lose or fake data (existing entry, errors, incomplete run)."""

    exit_code = ExitCode.USAGE


@dataclass(frozen=True)
class Promotion:
    kernel: str
    version: str
    device: str
    action: Literal["created", "added", "replaced", "unchanged"]
    document: BaselineFile


def entry_from_results(
    results: Results, kernel: str, promoted_at: datetime, tag: str | None
) -> BaselineEntry:
    meta = results.meta
    # A committed baseline names no runner: no hostname, no runner-local cache path.
    return BaselineEntry(
        device=meta.device.model_copy(update={"hostname": ""}),
        provenance=Provenance(
            tag=tag,
            commit=meta.git.commit,
            ref=meta.git.ref,
            promoted_at=promoted_at,
            measured_at=meta.started_at,
            tool_version=meta.tool_version,
            profile=meta.profile,
            dirty=meta.git.dirty,
        ),
        settings=meta.settings.model_copy(update={"compilation_cache": None}),
        cases=[c for c in results.cases if c.kernel == kernel],
    )


def dirty_note(results: Results) -> str | None:
    """What a promotion says of results measured with uncommitted changes: the entry records
    it, and its commit alone cannot reproduce (or ``remodel``) what was measured."""
    git = results.meta.git
    if not git.dirty:
        return None
    where = f" on {git.commit[:12]}" if git.commit else ""
    return (
        f"note: measured with uncommitted changes{where} (provenance.dirty): "
        "ci-bench remodel of this entry needs --at a commit that holds the code measured"
    )


def unnamed_matrix(source: object, results: Results) -> str:
    """Why a results file of format 2 on without ``meta.matrix`` is refused: every run
    since format 2 names its matrix, so a file without one cannot say what it left out."""
    return (
        f"{source}: meta.matrix: missing from a format-{results.schema_version} results file, "
        "so which cases the run had to measure is unknown (ci-bench run always writes it)"
    )


def check_promotable(results: Results, source: str) -> None:
    """Only complete, error-free results become a reference."""
    if not results.meta.complete:
        raise PromotionRefusedError(
            f"{source}: meta.complete: the run did not finish; not promoted"
        )
    errors = [c.id for c in results.cases if c.status != "ok"]
    if errors:
        more = f" (+{len(errors) - 3} more)" if len(errors) > 3 else ""
        raise PromotionRefusedError(
            f"{source}: cases: results contain errors, not promoted: {', '.join(errors[:3])}{more}"
        )
    if not results.cases:
        raise PromotionRefusedError(f"{source}: cases: no cases to promote")
    if results.meta.subset:
        raise PromotionRefusedError(
            f"{source}: meta: only part of the {results.meta.profile or 'ad-hoc'} matrix ran "
            "(--case, --shard or --shape); merge the shards or run the whole profile"
        )
    if results.meta.matrix is None and results.schema_version >= 2:
        raise PromotionRefusedError(unnamed_matrix(source, results) + "; not promoted")
    # Completeness from the cases themselves, not from the file's word (meta.complete).
    missing, stray = results.uncovered()
    if missing:
        matrix = results.meta.matrix or []
        raise PromotionRefusedError(
            f"{source}: cases: {len(missing)} of the matrix's {len(matrix)} cases were never "
            f"measured ({', '.join(missing[:3])}{' …' if len(missing) > 3 else ''}); not promoted"
        )
    if stray:
        raise PromotionRefusedError(
            f"{source}: cases: {stray[0]} is not in meta.matrix; the file contradicts itself, "
            "not promoted"
        )


def merge_entry(
    existing: BaselineFile | None,
    kernel: str,
    version: str,
    entry: BaselineEntry,
    *,
    force: bool,
    keep_existing: bool = False,
) -> Promotion:
    """Add ``entry`` to the file, keeping every other device's entry.

    The same device is replaced only with ``force``; re-promoting from the same tag is a
    no-op, so a re-run release job changes nothing. ``keep_existing`` (release tags) keeps
    an existing entry instead of refusing: a library tag that did not bump a kernel's
    version leaves that version's numbers as they are.
    """
    device = entry.device.identity
    if existing is None:
        doc = BaselineFile(kernel=kernel, version=version, entries=[entry])
        return Promotion(kernel, version, device, "created", doc)
    current = existing.entry_for(entry.device)
    if current is None:
        doc = existing.model_copy(
            update={
                "entries": [*existing.entries, entry],
                "schema_version": BASELINE_SCHEMA_VERSION,
            }
        )
        return Promotion(kernel, version, device, "added", BaselineFile.model_validate(doc))
    tag = entry.provenance.tag
    same_tag = tag is not None and current.provenance.tag == tag
    if (same_tag or keep_existing) and not force:
        return Promotion(kernel, version, device, "unchanged", existing)
    if not force:
        was = current.provenance
        raise PromotionRefusedError(
            f"{kernel}_v{version}.json already has an entry for {device} "
            f"(tag {was.tag or '-'}, commit {(was.commit or '-')[:12]}, promoted "
            f"{was.promoted_at:%Y-%m-%d %H:%M}Z); use --force to replace it"
        )
    entries = [entry if e is current else e for e in existing.entries]
    doc = existing.model_copy(
        update={"entries": entries, "schema_version": BASELINE_SCHEMA_VERSION}
    )
    return Promotion(kernel, version, device, "replaced", BaselineFile.model_validate(doc))


def plan_promotions(
    results: Results,
    existing: dict[str, BaselineFile | None],
    *,
    promoted_at: datetime,
    tag: str | None,
    force: bool,
    source: str,
) -> list[Promotion]:
    """One promotion per kernel in the results; ``existing`` maps kernel -> current file.

    With a release ``tag`` it is what the tag workflow does: a kernel whose version already
    has numbers for this device keeps them (``unchanged``; a release bumps some kernels,
    not all), the others are promoted; ``force`` still replaces. Without a tag an existing
    entry is refused, so hand-promoted numbers are never replaced by accident.
    """
    check_promotable(results, source)
    promotions = []
    for kernel, version in results.meta.kernels.items():
        entry = entry_from_results(results, kernel, promoted_at, tag)
        if entry.cases:
            promotions.append(
                merge_entry(
                    existing.get(kernel),
                    kernel,
                    version,
                    entry,
                    force=force,
                    keep_existing=tag is not None,
                )
            )
    return promotions


def write_promotions(folder: Path, promotions: Sequence[Promotion]) -> list[Path]:
    """Write changed files atomically; unchanged ones are not touched (byte-identical).

    Every file is checked before any is written; each is then written in pieces."""
    changed = [p for p in promotions if p.action != "unchanged"]
    for promotion in changed:
        check_readable_back(promotion)
    written = []
    for promotion in changed:
        path = baseline_path(folder, promotion.kernel, promotion.version)
        # A store file is read, merged and written back under the store's lock.
        write_text(path, baseline_text(promotion.document), what="baseline", replace=True)
        written.append(path)
    return written


def pinned_version(pins: Mapping[str, str], kernel: str) -> tuple[str | None, bool]:
    """(version, strict): a pin naming the kernel must exist; a bare version (``*``) applies
    to the kernels that have a baseline at that version and leaves the others alone."""
    if kernel in pins:
        return pins[kernel], True
    return pins.get(ANY_KERNEL), False


def check_pins(folder: Path, pins: Mapping[str, str]) -> None:
    """Pins that name a kernel must have their file: checked before anything is measured."""
    for kernel, version in pins.items():
        if kernel != ANY_KERNEL and not present(baseline_path(folder, kernel, version)):
            path = baseline_path(folder, kernel, version)
            raise InputError(f"{path}: baseline file not found (pinned {kernel}={version})")


def lookups_for(
    results: Results, folder: Path, files: list[Path], pins: Mapping[str, str]
) -> dict[str, Lookup]:
    """One baseline lookup per kernel: explicit files first, then pins, else the store's rule."""
    explicit: dict[str, Lookup] = {}
    for path in files:
        baseline = load_baseline(path)
        explicit[baseline.kernel] = Lookup(baseline.kernel, "", path, baseline, None)
    lookups = {}
    for kernel, version in results.meta.kernels.items():
        if kernel in explicit:
            given = explicit[kernel]
            note = None
            if given.baseline and given.baseline.version != version:
                note = f"compared with v{given.baseline.version} ({given.path})"
            lookups[kernel] = Lookup(kernel, version, given.path, given.baseline, note)
        else:
            pin, strict = pinned_version(pins, kernel)
            if pin is not None and not strict and not present(baseline_path(folder, kernel, pin)):
                found = find_baseline(folder, kernel, version)
                note = f"no v{pin} baseline for {kernel}: compared by its own version"
                lookups[kernel] = Lookup(
                    found.kernel,
                    found.version,
                    found.path,
                    found.baseline,
                    f"{note}; {found.note}" if found.note else note,
                )
            else:
                lookups[kernel] = find_baseline(folder, kernel, version, pin)
    stray = set(explicit) - set(lookups)
    if stray:
        raise InputError(f"--baseline: no results for kernel {', '.join(sorted(stray))}")
    return lookups
