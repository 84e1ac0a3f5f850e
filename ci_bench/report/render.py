"""Pure rendering of results: terminal / markdown tables via tabulate, no I/O.

Every table that shows times says whether they are an interpreter's (a CPU run: Pallas
``interpret=True``), and a terminal table fits ``WIDTH`` columns unless asked to be wide.
"""

from __future__ import annotations

import contextlib
import textwrap
from collections.abc import Callable, Collection, Iterator, Sequence

import tabulate as tabulate_module
from tabulate import tabulate

from ci_bench.report.escape import md_inline
from ci_bench.schema import (
    CaseResult,
    Metrics,
    Results,
    TimingStats,
)
from ci_bench.text import case_count, fmt_ms


def fmt_ratio(value: float | None, suffix: str = "×") -> str:
    return "–" if value is None else f"{value:.2f}{suffix}"


def fmt_float(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    if value != 0 and abs(value) < 10**-digits:
        return f"{value:.{digits - 1}e}"
    return f"{value:.{digits}f}"


def fmt_pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}%"


def fmt_gbps(metrics: Metrics | None) -> str:
    return "–" if metrics is None else f"{metrics.achieved_gbps:.4g}"


def fmt_util(metrics: Metrics | None) -> str:
    """The headline utilisation: HBM % for memory-bound (or vector-unit) kernels, else MFU.

    Memory-bound means the roofline says so; with unknown peaks (CPU) the SPEC's compute
    unit decides. The other figure stays in the JSON.
    """
    if metrics is None:
        return "–"
    if metrics.headline == "hbm":
        value = metrics.hbm_utilization
        return "–" if value is None else f"{fmt_pct(value)} HBM"
    return "–" if metrics.mfu is None else f"{fmt_pct(metrics.mfu)} MFU"


# Short mode labels for tables; the case id spells the mode out (``.../backward``).
MODE_LABELS = {"forward": "fwd", "backward": "bwd", "forward+backward": "fwd+bwd"}
RUN_HEADERS = (
    "case",
    "mode",
    "Pallas ms",  # mean ± std
    "native ms",
    "speedup",
    "TFLOPS",
    "GB/s",
    "MFU/HBM",
    "compile ms",
)
# A terminal's width: tables leave columns out (last first) rather than wrap.
WIDTH = 120
RUN_DROP_ORDER = ("compile ms", "GB/s", "native ms", "MFU/HBM", "TFLOPS")

# Interpret mode (every CPU run): the figures are an interpreter's, not the kernel's.
INTERPRETER = "CPU interpreter — times are not kernel performance"
INTERPRETED_MARK = "†"
# What ran Pallas, by a kernel's CPU interpret mode (``--cpu-interpret``, config
# ``cpu-interpret-tpu``, a SPEC's ``cpu_interpret``): the words a banner names it with.
INTERPRETER_WORDS = {
    "kernel": "Pallas ran with interpret=True (each kernel's own interpret choice)",
    "tpu": "Pallas ran under jax's TPU interpreter (every pallas_call of the kernel)",
}
MIXED_WORDS = (
    "Pallas ran under jax's TPU interpreter for the kernels it is set for "
    "(cpu-interpret-tpu, their SPEC's cpu_interpret) and with interpret=True for the others"
)


def interpreter_words(modes: Collection[str | None] = ("kernel",)) -> str:
    """What ran Pallas, for the interpret modes of the kernels a table shows (a results
    file records the run's mode: None in older files, the kernel's own)."""
    found = {mode or "kernel" for mode in modes} or {"kernel"}
    return INTERPRETER_WORDS[found.pop()] if len(found) == 1 else MIXED_WORDS


def interpreted_note(modes: Collection[str | None] = ("kernel",)) -> str:
    """The footnote under a markdown table of interpreted times."""
    return (
        f"{INTERPRETED_MARK} {INTERPRETER}: {interpreter_words(modes)}, so its times, and "
        "the speedup, TFLOPS and GB/s derived from them, are the interpreter's against "
        "compiled XLA; they say nothing of the kernel on an accelerator."
    )


INTERPRETED_NOTE = interpreted_note()
# Columns whose values come from the Pallas time (marked when interpreted).
_DERIVED = ("Pallas ms", "speedup", "TFLOPS", "GB/s", "MFU/HBM", "MFU / HBM")


def interpreted_banner(modes: Collection[str | None] = ("kernel",)) -> str:
    """The line above every table of interpreted times, naming the interpreter."""
    return (
        f"{INTERPRETED_MARK} {INTERPRETER}: {interpreter_words(modes)}; the figures "
        f"marked {INTERPRETED_MARK} are the interpreter's, against compiled XLA."
    )


def interpreted_headers(headers: Sequence[str], interpreted: bool) -> list[str]:
    """``headers`` with the interpreter's mark on every figure derived from Pallas times."""
    if not interpreted:
        return list(headers)
    return [f"{h}{INTERPRETED_MARK}" if h in _DERIVED else h for h in headers]


def fit_columns(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    render: Callable[[Sequence[str], list[list[str]]], str],
    drop_order: Sequence[str],
    width: int | None = WIDTH,
) -> tuple[str, list[str]]:
    """The table rendered with the columns that fit ``width``: those in ``drop_order``
    left out, first first, until it fits (``width=None``: all). Returns the text and the
    names left out."""
    keep = list(range(len(headers)))
    left_out: list[str] = []
    while True:
        text = render([headers[i] for i in keep], [[r[i] for i in keep] for r in rows])
        widest = max((len(line) for line in text.splitlines()), default=0)
        if width is None or widest <= width:
            return text, left_out
        droppable = [name for name in drop_order if name in [headers[i] for i in keep]]
        if not droppable:
            return text, left_out
        at = next(i for i in keep if headers[i] == droppable[0])
        keep.remove(at)
        left_out.append(droppable[0].rstrip(INTERPRETED_MARK))


# An implementation other than the subject and the baseline: a row under its case.
OTHER_MARK = "↳ "


def point_id(case_id: str, mode: str) -> str:
    """The id without its mode suffix: the mode has its own column."""
    suffix = f"/{mode}"
    return case_id[: -len(suffix)] if mode != "forward" and case_id.endswith(suffix) else case_id


def fmt_std(value: float) -> str:
    """A spread to two significant figures: it is known no better."""
    if value >= 10:
        return f"{value:.0f}"
    if value >= 1:
        return f"{value:.1f}"
    return f"{value:.2g}"


def _timing(stats: TimingStats | None) -> str:
    return "–" if stats is None else f"{fmt_ms(stats.mean_ms)} ±{fmt_std(stats.std_ms)}"


def run_row(case: CaseResult) -> list[str]:
    """One case: the subject's figures (errors say so; the message follows the table)."""
    metrics = case.metrics
    return [
        point_id(case.id, case.mode),
        MODE_LABELS.get(case.mode, case.mode),
        "error (below)" if case.status != "ok" else _timing(case.pallas),
        fmt_ms(case.native.mean_ms if case.native else None),
        fmt_ratio(case.speedup),
        fmt_float(case.tflops, 4),
        fmt_gbps(metrics),
        fmt_util(metrics),
        fmt_ms(case.compile.pallas_ms),
    ]


def other_rows(case: CaseResult) -> list[list[str]]:
    """The case's other implementations, one row each under it: time, speedup over the
    same baseline, TFLOPS and GB/s of the same cost model, compile time."""
    rows = []
    metrics = case.metrics
    for name, other in case.implementations.others.items():
        stats = other.timing
        seconds = stats.mean_ms / 1e3 if stats and stats.mean_ms > 0 else None
        tflops = metrics.flops / seconds / 1e12 if metrics and seconds else None
        gbps = f"{metrics.bytes_accessed / seconds / 1e9:.4g}" if metrics and seconds else "–"
        rows.append(
            [
                f"{OTHER_MARK}{name}",
                MODE_LABELS.get(case.mode, case.mode),
                _timing(stats),
                "",
                fmt_ratio(other.speedup),
                fmt_float(tflops, 4),
                gbps,
                "",
                fmt_ms(other.compile_ms),
            ]
        )
    return rows


def _cells(rows: list[list[str]], tablefmt: str) -> list[list[str]]:
    """Markdown tables carry untrusted text (ids, errors): every cell escaped, one line."""
    if tablefmt != "github":
        return rows
    return [[md_inline(cell) for cell in row] for row in rows]


@contextlib.contextmanager
def tight_headers() -> Iterator[None]:
    """tabulate widens every column to its header plus 2; a terminal table's columns are
    set by their values instead, so that it stays within 120 columns."""
    saved = tabulate_module.MIN_PADDING
    tabulate_module.MIN_PADDING = 0
    try:
        yield
    finally:
        tabulate_module.MIN_PADDING = saved


def implementation_notes(cases: Sequence[CaseResult]) -> list[str]:
    """Per kernel whose subject or baseline is not pallas / native, or that times others:
    which implementation each column holds."""
    notes: dict[str, str] = {}
    for c in cases:
        names = c.implementations
        if (names.subject, names.baseline) == ("pallas", "native") and not names.others:
            continue
        others = f"; {OTHER_MARK}rows: {', '.join(names.others)}" if names.others else ""
        notes.setdefault(
            c.kernel,
            f"{c.kernel}: Pallas ms is {names.subject} (the subject), native ms is "
            f"{names.baseline} (the baseline){others}",
        )
    return list(notes.values())


def results_table(
    cases: Sequence[CaseResult],
    tablefmt: str = "simple",
    *,
    interpreted: bool = False,
    width: int | None = WIDTH,
    interpreters: Collection[str | None] = ("kernel",),
) -> str:
    """One row per case (a kernel's modes side by side), each other implementation in a
    row under its case; then which implementation each column holds where a kernel names
    its own, the interpreter's note, the cost-model checks that failed, every error.

    A terminal table (``simple``) leaves columns out to fit ``width`` and says which
    (``width=None``: every column, ``--wide``); markdown keeps every column.
    """
    rows = [row for c in cases for row in (run_row(c), *other_rows(c))]
    marked = interpreted_headers(RUN_HEADERS, interpreted)
    colalign = dict(zip(marked, ("left", "left", *("right",) * (len(marked) - 2)), strict=True))

    def render(headers: Sequence[str], body: list[list[str]]) -> str:
        with tight_headers():
            return tabulate(
                _cells(body, tablefmt),
                headers=list(headers),
                tablefmt=tablefmt,
                disable_numparse=True,
                colalign=[colalign[h] for h in headers],
            )

    drop = [h for h in marked if h.rstrip(INTERPRETED_MARK) in RUN_DROP_ORDER]
    drop.sort(key=lambda h: RUN_DROP_ORDER.index(h.rstrip(INTERPRETED_MARK)))
    table, left_out = fit_columns(
        marked, rows, render, drop, width if tablefmt == "simple" else None
    )
    escape = md_inline if tablefmt == "github" else (lambda text: text)
    notes = [escape(n) for n in implementation_notes(cases)]
    if left_out:
        notes.append(f"(left out to fit {width} columns: {', '.join(left_out)}; --wide shows them)")
    notes += [escape(line) for line in cost_check_notes(cases)]
    errors = [c for c in cases if c.status != "ok"]
    lines = [interpreted_banner(interpreters), "", table] if interpreted else [table]
    if notes or errors:
        lines.append("")
    lines += notes
    lines += [f"{escape(c.id)}: error: {escape(c.error or 'error')}" for c in errors]
    if tablefmt != "simple" or width is None:
        return "\n".join(lines)
    return "\n".join(wrap(line, width) if line is not table else line for line in lines)


def wrap(text: str, width: int = WIDTH) -> str:
    """A note line folded to the terminal's width, continuation lines indented."""
    if len(text) <= width:
        return text
    return textwrap.fill(text, width, subsequent_indent="  ", break_on_hyphens=False)


def cost_check_notes(cases: Sequence[CaseResult]) -> list[str]:
    """Per kernel, the cost-model checks that failed, with the first case as the example:
    a wrong FLOPs model makes TFLOPS and MFU lie, a wrong bytes model GB/s and HBM %."""
    lines = []
    for kernel in dict.fromkeys(c.kernel for c in cases):
        mine = [c for c in cases if c.kernel == kernel]
        for what in ("FLOPs", "bytes"):
            wrong = [
                (c, check)
                for c in mine
                if (check := c.cost_check if what == "FLOPs" else c.bytes_check)
                and check.status == "mismatch"
            ]
            if wrong:
                first, check = wrong[0]
                lines.append(
                    f"{kernel}: {what} model check failed in {len(wrong)} case(s), e.g. "
                    f"{first.id}: {check.reason}"
                )
    return lines


def run_summary(results: Results, output: str | None = None) -> str:
    """What ran where, what ``±`` means, and the next command (a newcomer's first table)."""
    ok = sum(c.status == "ok" for c in results.cases)
    device = results.meta.device
    kind = device.device_kind
    where = device.platform if kind.lower() == device.platform else f"{device.platform} ({kind})"
    settings = results.meta.settings
    lines = [
        f"{ok}/{case_count(len(results.cases))} ok on "
        f"{where}, {device.software}, profile {results.meta.profile or 'ad-hoc'}, "
        f"warmup {settings.warmup}, repeats {settings.repeats}",
        "ms: the mean of each case's timed calls, ± their standard deviation (the results "
        "file also holds the median, min, max and every sample)",
    ]
    if ok == 0:
        lines.append(
            "nothing measured (exit 3): every case failed (the errors are above); "
            "`ci-bench check-spec` checks a kernel's SPEC without running it, "
            "`check-spec --run` runs each case once for correctness, without timing"
        )
    elif output is None:
        lines.append("next: `ci-bench run ... -o results.json` keeps the results to compare")
    else:
        lines.append(
            f"next: `ci-bench compare {output}` (against the stored baseline), "
            f"`ci-bench promote {output} --tag TAG` (make it the baseline), or "
            "`ci-bench ab --base REF` (a change against a git ref, fairly on one machine)"
        )
    return "\n".join(wrap(line) for line in lines)
