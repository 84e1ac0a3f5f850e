"""The cost model's terminal table (pure): traffic, re-read operand, steps, VMEM and
modelled time per chip for each case."""

from __future__ import annotations

from tabulate import tabulate

from ci_bench.judge.model import structural_only, structural_text
from ci_bench.schema.analysis import Analysis
from ci_bench.schema.report import ModelChange

MIB = 1024 * 1024


def _mib(n: int | None) -> str:
    return "–" if n is None else f"{n / MIB:.2f}"


def _against(change: ModelChange | None) -> str:
    """The ``vs base`` cell: the verdict and why; a structural-only comparison (a partial
    base model) is no verdict, only what it says."""
    if change is None:
        return "new"
    return change.reason if structural_only(change) else f"{change.verdict}: {change.reason}"


def analysis_table(analysis: Analysis) -> str:
    """One row per case: traffic, re-read operand, steps, VMEM, modelled µs per chip."""
    chips = analysis.meta.chips
    headers = ["case", "HBM MiB", "ideal", "re-read", "steps", "VMEM MiB"]
    headers += [f"{c} µs" for c in chips]
    if analysis.meta.base_ref:
        headers.append("vs base")
    rows = []
    for case in analysis.cases:
        if case.status == "not_modelled":
            rows.append([case.id, f"not modelled: {case.reason}"[:80]])
            continue
        if case.status == "partial":  # lower bounds only: no modelled time is shown
            row = [case.id, f"{case.reason}"[:80]]
            if analysis.meta.base_ref:  # its structure against the base's, never a time
                blank = len(headers) - len(row) - 1
                row += [""] * blank + [structural_text(case.against) if case.against else "new"]
            rows.append(row)
            continue
        reread = next((c.reread_operand for c in case.calls if c.reread_operand), None)
        row = [
            case.id,
            _mib(case.hbm_bytes),
            _mib(case.ideal_bytes),
            reread or "–",
            case.grid_steps,
            _mib(case.vmem_bytes),
        ]
        for name in chips:
            found = case.chips.get(name)
            cell = "–" if found is None else f"{found.modelled_us:,.1f}"
            row.append(cell if found is None or found.fits else f"{cell} ✗ VMEM")
        if analysis.meta.base_ref:
            row.append(_against(case.against))
        rows.append(row)
    lines = [tabulate(rows, headers=headers, disable_numparse=True)]
    wrong = [c for c in analysis.cases if c.flops_check == "mismatch"]
    if wrong:
        lines.append(
            "\nMXU FLOPs read from the kernel differ from the SPEC's model beyond the factor:"
        )
        lines += [f"  {c.id}: {c.flops_ratio:.2f}x the SPEC's {c.spec_flops:,}" for c in wrong]
    errors = [e for c in analysis.cases for e in (f"{c.id}: {x}" for x in c.errors)]
    if errors:
        lines.append("\nDoes not fit VMEM (an error on that chip):")
        lines += [f"  {e}" for e in errors]
    lines += [f"\n{r.state}: {r.reason}" for r in analysis.run_states]
    lines.append(
        "\nµs: MXU, vector (VALU) and transcendental (EUP) work overlapped, the busiest one "
        'counted (docs/MODEL.md, "Time"), then on a TPU the XLA operations around the kernels '
        'at HBM bandwidth (their bytes under perfect fusion, "Outside the kernels"; HBM MiB '
        "are the kernels' own); transposes and relayouts inside a kernel are not timed"
    )
    seconds = analysis.meta.seconds or 0.0
    lines.append(f"\n{analysis.verdict}: {len(analysis.cases)} cases in {seconds:.1f} s")
    return "\n".join(lines) + "\n"
