"""The specification's section 3.3 table (``ci-bench profile`` on a TPU, ``--read``) and its
reading of each figure as a hint. Pure: values in, text out.

The hints are the specification's own table: scalar ALU high -> index arithmetic is the
bottleneck (precompute in SMEM); MXU low -> bigger tiles, fewer DMA waits; vector spills ->
smaller tiles; vector store near 100 % -> write-back bound (asynchronous write-back); DMA
waits against copies, where they differ -> several copies behind one wait, normal.
The thresholds below are ours (the specification names no number); docs/USING.md lists them.
"""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate

from ci_bench.report.comment_tables import case_cell
from ci_bench.report.escape import md_inline
from ci_bench.schema.report import CaseVerdict
from ci_bench.schema.unit_metrics import UNITS, KernelUnitMetrics, OutsideKernels

SCALAR_HIGH = 50.0  # % of scalar ALU slots: index arithmetic dominates
MXU_LOW = 50.0  # % of MXU slots, for a kernel that uses the MXU at all
STORE_HIGH = 90.0  # % of vector store slots: write-back bound
SHORT = {
    "MXU": "MXU",
    "Scalar ALU": "scalar",
    "Vector Store": "vst",
    "Vector Load": "vld",
    "Vector ALU": "valu",
    "Vector EUP": "eup",
    "XLU": "xlu",
}


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f} %"


def _count(value: int | None) -> str:
    return "–" if value is None else str(value)


def dma_text(m: KernelUnitMetrics) -> str:
    """``2 in, 1 out, 3 waits`` (the code's DMA instructions); ``–`` without a dump."""
    if m.bundles is None:
        return "–"
    copies_in, copies_out = m.dma.get("hbm_to_vmem", 0), m.dma.get("vmem_to_hbm", 0)
    waits = m.dma.get("done.wait", 0)
    return f"{copies_in} in, {copies_out} out, {waits} waits"


def hints(m: KernelUnitMetrics) -> list[str]:
    """The specification's reading of each figure that calls for one, in its order."""
    found = []
    util = m.utilisation
    scalar, mxu, store = util.get("Scalar ALU"), util.get("MXU"), util.get("Vector Store")
    if scalar is not None and scalar >= SCALAR_HIGH:
        found.append(
            f"scalar ALU {scalar:.0f} %: index arithmetic is the bottleneck — precompute "
            "indices (SMEM lookup tables)"
        )
    if mxu is not None and 0 < mxu < MXU_LOW:
        found.append(f"MXU {mxu:.0f} %: the MXU waits — larger tiles, fewer DMA waits")
    if m.spills:
        found.append(
            f"{m.spills} vector spills ({m.fills or 0} fills): the registers overflow — "
            "smaller tiles"
        )
    if store is not None and store >= STORE_HIGH:
        found.append(f"vector store {store:.0f} %: write-back bound — asynchronous write-back")
    waits = sum(n for kind, n in m.dma.items() if "wait" in kind)
    copies = sum(n for kind, n in m.dma.items() if "wait" not in kind)
    if m.bundles is not None and copies and waits != copies:
        found.append(
            f"{waits} DMA waits for {copies} copies: several copies behind one wait, or one "
            "waited on in several places (normal)"
        )
    return found


def metrics_rows(metrics: Sequence[KernelUnitMetrics]) -> list[list[str]]:
    rows = []
    for m in metrics:
        util = [_pct(m.utilisation.get(u)) for u in UNITS]
        spills = "–" if m.spills is None else f"{m.spills}/{_count(m.fills)}"
        rows.append(
            [
                m.kernel,
                f"{m.device_us:.1f}",
                *util,
                spills,
                dma_text(m),
                _count(m.bundles),
                _count(m.register_pressure),
            ]
        )
    return rows


HEADERS = ("kernel", "µs/call", *(SHORT[u] for u in UNITS), "spills/fills", "DMA", "bundles")


def metrics_table(metrics: Sequence[KernelUnitMetrics], tablefmt: str = "simple") -> str:
    """One row per Pallas kernel, then its hints; ``vregs`` is the dump's register pressure."""
    table = tabulate(
        metrics_rows(metrics),
        headers=[*HEADERS, "vregs"],
        tablefmt=tablefmt,
        disable_numparse=True,
    )
    notes = [f"{m.kernel}: {hint}" for m in metrics for hint in hints(m)]
    low = [m for m in metrics if m.utilisation and m.covered < 0.9]
    notes += [f"{m.kernel}: the counters cover {m.covered:.0%} of its time" for m in low]
    return "\n".join([table, *notes])


def outside_line(outside: OutsideKernels) -> str:
    """One line on the XLA operations beside the kernels, per call of the program: the
    time they take of the program's, by kind, and what copies there usually mean."""
    if not outside.ops:
        program = f"{outside.program_us:.1f} µs a call"
        return f"beside the Pallas kernels: nothing (the program, {program}, is its kernels)"

    def count(n: float) -> str:
        return f"{n:.0f}" if n == int(n) else f"{n:.1f}"

    kinds = ", ".join(f"{kind} x{count(n)} {us:.1f} µs" for kind, (n, us) in outside.ops.items())
    line = (
        f"beside the Pallas kernels: {outside.us:.1f} µs a call of the program's "
        f"{outside.program_us:.1f} ({kinds})"
    )
    if any(kind.startswith("copy") for kind in outside.ops):
        line += (
            "; copies around a kernel are usually XLA changing an operand's or the result's "
            "layout for it (a pallas_call takes its arrays row-major)"
        )
    return line


SOURCE = (
    "utilisation: the compiler's per-bundle occupancy over the measured windows (libtpu's "
    "counters; estimates, not hardware counters); spills, DMA, bundles, vregs: the kernel's "
    "code (LLO dump), not per call"
)


MOVED_POINTS = 5.0  # a unit's utilisation moved by at least this many percentage points
_COUNTED = (("spills", "spills"), ("fills", "fills"), ("register_pressure", "vregs"))


def moved(head: KernelUnitMetrics, base: KernelUnitMetrics) -> list[str]:
    """What changed from the base to the head, in the specification's terms: each unit
    that moved by ``MOVED_POINTS`` or more, and any change in spills, fills, register
    pressure, bundles or DMA instructions."""
    found = []
    for unit in UNITS:
        h, b = head.utilisation.get(unit), base.utilisation.get(unit)
        if h is not None and b is not None and abs(h - b) >= MOVED_POINTS:
            found.append(f"{SHORT[unit]} {b:.0f} % → {h:.0f} %")
    for field, label in _COUNTED:
        h, b = getattr(head, field), getattr(base, field)
        if h != b and (h is not None or b is not None):
            found.append(f"{label} {_count(b)} → {_count(h)}")
    if head.bundles and base.bundles and head.bundles != base.bundles:
        found.append(f"bundles {base.bundles} → {head.bundles}")
    if head.bundles is not None and base.bundles is not None and head.dma != base.dma:
        found.append(f"DMA {dma_text(base)} → {dma_text(head)}")
    return found


def _case_lines(v: CaseVerdict) -> list[str]:
    pair = v.unit_metrics
    assert pair is not None
    lines = []
    bases = {m.kernel: m for m in pair.base}
    for head in pair.head:
        base = bases.get(head.kernel)
        if base is None:
            said = "the base has no such kernel"
        else:
            said = ", ".join(moved(head, base)) or f"no unit moved by {MOVED_POINTS:.0f} points"
        lines.append(f"- {case_cell(v)} `{md_inline(head.kernel)}`: {said}")
        lines += [f"  - {md_inline(hint)}" for hint in hints(head)]
    if pair.note:
        lines.append(f"- {case_cell(v)}: {md_inline(pair.note)}")
    return lines


def comment_section(cases: Sequence[CaseVerdict]) -> list[str]:
    """The comment's collapsible section: for each slower case whose unit metrics were
    collected, base → head (empty when none were)."""
    with_metrics = [v for v in cases if v.unit_metrics is not None]
    if not with_metrics:
        return []
    n = len(with_metrics)
    summary = (
        f"Unit metrics of the {n} slower case{'s' if n > 1 else ''}, base → head "
        "(compiler estimates over the measured windows)"
    )
    items = [line for v in with_metrics for line in _case_lines(v)]
    return ["", f"<details><summary>{summary}</summary>", "", *items, "", "</details>"]
