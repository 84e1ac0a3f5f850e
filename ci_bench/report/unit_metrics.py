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

from ci_bench.schema.unit_metrics import UNITS, KernelUnitMetrics

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


SOURCE = (
    "utilisation: the compiler's per-bundle occupancy over the measured windows (libtpu's "
    "counters; estimates, not hardware counters); spills, DMA, bundles, vregs: the kernel's "
    "code (LLO dump), not per call"
)
