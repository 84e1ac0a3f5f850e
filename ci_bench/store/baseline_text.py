"""A baseline document as text, and the checks before it is written: within the readers'
size limit, finite, and reading back identically, one piece (case) at a time so a large
baseline is never held twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ci_bench.errors import InputError
from ci_bench.schema import BaselineFile
from ci_bench.schema.base import Model
from ci_bench.store.files import MAX_FILE_BYTES, dump_chunks, non_finite, parse_json

if TYPE_CHECKING:
    from ci_bench.store.baselines import Promotion


def baseline_text(document: BaselineFile) -> Iterator[str]:
    """The file's text in pieces (one case at a time): a large baseline is never one string."""
    yield from dump_chunks(document, ("entries", "cases"))


def check_size(document: BaselineFile) -> None:
    """Refused past the reader's size limit (every later compare would refuse the file),
    before anything is written, locally or through the API."""
    size = sum(len(piece.encode()) for piece in baseline_text(document))
    if size > MAX_FILE_BYTES:
        raise InputError(
            f"{document.kernel}_v{document.version}.json: would be {size / 2**20:.0f} MiB, "
            f"over the {MAX_FILE_BYTES // 2**20} MiB every reader accepts; not written"
        )


def render_baseline(document: BaselineFile) -> str:
    """The file's text, whole (the API writes one string); refused past the size limit."""
    check_size(document)
    return "".join(baseline_text(document))


def _parts(document: BaselineFile) -> Iterator[tuple[str, Model]]:
    """(dotted path, piece): the document without its entries, each entry without its
    cases, each case: checked one at a time, never the whole document at once."""
    yield "", document.model_copy(update={"entries": []})
    for i, entry in enumerate(document.entries):
        yield f"entries.{i}.", entry.model_copy(update={"cases": []})
        for j, case in enumerate(entry.cases):
            yield f"entries.{i}.cases.{j}.", case


def check_readable_back(promotion: Promotion) -> None:
    """Refused unless reading the file back gives the same document, piece by piece.

    A non-finite number would be written as ``null`` and poison the store: it is refused
    here, before anything is written.
    """
    document = promotion.document
    where = f"{promotion.kernel}_v{promotion.version}.json"
    for at, part in _parts(document):
        bad = non_finite(part.model_dump(mode="python"))
        if bad:
            raise InputError(f"{where}: {at}{bad}: not a finite number; not written")
    check_size(document)
    for _, part in _parts(document):
        try:
            data = parse_json(part.model_dump_json().encode(), where, "baseline")
            again = type(part).model_validate(data)
        except (InputError, ValueError) as exc:
            raise InputError(f"{where}: would not read back ({exc}); not written") from None
        if again != part:
            raise InputError(f"{where}: would not read back identically; not written")
