"""``ci-bench lower``'s terminal table: within 120 columns. Each error goes under the table,
folded (a Mosaic message is hundreds of characters); long cells are cut and the columns a
terminal cannot hold are left out and named, as the other tables do."""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate

from ci_bench.report.render import WIDTH, fit_columns, tight_headers, wrap
from ci_bench.schema.lowering import LoweredCase

HEADERS = ("case", "status", "chips ok", "kind", "custom calls", "VMEM MiB")
DROP_ORDER = ("custom calls", "kind", "chips ok")
CELL_MAX = 40  # a cell longer than this is cut (the JSON keeps it whole)


def _cut(text: str, limit: int = CELL_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _chips(lowered: LoweredCase) -> str:
    """'n/m' chips it lowered as, naming those that did not."""
    if not lowered.chips:
        return "–"
    bad = [name for name, c in lowered.chips.items() if c.status != "ok"]
    good = len(lowered.chips) - len(bad)
    return f"{good}/{len(lowered.chips)}" + (f" (not {', '.join(bad)})" if bad else "")


def _vmem(lowered: LoweredCase) -> str:
    model = lowered.model
    if model is None or model.vmem_bytes is None:
        return "–"
    return f"{model.vmem_bytes / 1024 / 1024:.2f}"


def _calls(lowered: LoweredCase) -> str:
    calls = list(lowered.custom_calls)
    if len(calls) > 2:
        return f"{', '.join(calls[:2])} +{len(calls) - 2}"
    return ", ".join(calls) or "–"


def lowering_table(cases: Sequence[LoweredCase], width: int | None = WIDTH) -> str:
    """The table, then what was left out, then one folded line per case's error."""
    rows = [
        [_cut(c.id, 80), c.status, _cut(_chips(c)), c.kind or "–", _cut(_calls(c)), _vmem(c)]
        for c in cases
    ]

    def render(headers: Sequence[str], body: list[list[str]]) -> str:
        with tight_headers():
            return tabulate(body, headers=list(headers), disable_numparse=True)

    table, left_out = fit_columns(HEADERS, rows, render, DROP_ORDER, width)
    lines = [table]
    if left_out:
        lines += [
            "",
            f"(left out to fit {width} columns: {', '.join(left_out)}; the JSON has them)",
        ]
    errors = [c for c in cases if c.error]
    if errors:
        lines.append("")
    fold = (lambda text: text) if width is None else (lambda text: wrap(text, width))
    lines += [fold(f"{c.id}: {c.status}: {c.error}") for c in errors]
    return "\n".join(lines)
