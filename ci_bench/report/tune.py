"""``ci-bench tune``'s table: per case and chip, the model's best candidates and the default,
what was dropped and why (pure text)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from ci_bench.schema.tune import TIE_RESOLUTION, Candidate, TunedCase, TuneReport

MIB = 1024 * 1024
TIE_NOTE = (
    "the model cannot tell these apart (modelled time, HBM bytes and grid steps within "
    f"{TIE_RESOLUTION:.1%}, docs/TUNE.md); --measure K breaks it"
)


def label(config: Mapping[str, object]) -> str:
    """A config as a short tuple in its own order: ``(512, 1024, 1024)``."""
    return "(" + ", ".join(str(v) for v in config.values()) + ")"


def _why_counts(candidates: Sequence[Candidate]) -> list[str]:
    """Drop reasons, most common first, each with its count (the values left out)."""
    reasons: Counter[str] = Counter()
    for c in candidates:
        if c.why_not is not None:
            reasons[c.why_not.split(" (")[0]] += 1
        elif c.lowers is False:
            reasons[f"does not lower: {(c.lowering_error or '')[:120]}"] += 1
        elif c.host_error:  # this machine's fault, never the kernel's: not "does not lower"
            reasons[f"lowering not checked (host error): {(c.lowering_error or '')[:120]}"] += 1
    return [f"{n} x {reason}" for reason, n in reasons.most_common(5)]


def _row(rank: str, c: Candidate, chip: str) -> list[str]:
    on = c.chips[chip]
    vmem = "–" if c.vmem_bytes is None else f"{c.vmem_bytes / MIB:.2f}"
    return [
        rank,
        label(c.config),
        f"{on.modelled_us:,.1f}",
        on.bound,
        f"{c.steps:,}" if c.steps is not None else "–",
        f"{on.bytes / MIB:,.1f}",
        vmem,
        "yes" if on.fits else "no",
    ]


def _mark(c: Candidate, chip: str, shared: Counter) -> str:
    """The rank cell: ``1=`` where the rank is shared (a tie), ``(default)`` after it."""
    rank = c.chips[chip].rank
    return f"{rank}{'=' if shared[rank] > 1 else ''}{' (default)' if c.default else ''}"


def _grid(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _default_line(case: TunedCase, chip: str) -> str:
    """Why the default has no ratio on ``chip``, said where its time is (issue 41): it does
    not fit, does not lower, was not checked, or was not ranked."""
    default = case.candidates[case.default_index] if case.default_index is not None else None
    if default is None:
        return ""
    name = f"the default {label(default.config)}"
    on = default.chips.get(chip)
    if on is None:
        return f"; {name} is not ranked: {default.why_not or 'not modelled as ' + chip}"
    if not on.fits:
        why = (on.why_not or "its VMEM exceeds the limit").removeprefix(f"{chip}: ")
        return f"; {name} does not fit {chip} ({why}), so its {on.modelled_us:,.1f} µs cannot run"
    if on.lowers is False:
        return f"; {name} does not lower as {chip}: {(on.lowering_error or '')[:120]}"
    if on.lowers is None:
        return f"; {name} was not lowered as {chip} (host error): not ranked"
    return ""


def _tie_text(case: TunedCase, chip: str) -> str:
    members = case.tied[chip]
    knobs = ", ".join(case.tie_knobs.get(chip, [])) or "their knobs"
    return (
        f"a tie of {len(members)} configs whose {knobs} the model cannot tell apart, "
        f"{_configs([case.candidates[i].config for i in members])} (--measure breaks it)"
    )


def _configs(configs: Sequence[Mapping[str, object]], most: int = 4) -> str:
    shown = ", ".join(label(c) for c in configs[:most])
    return shown + (f" and {len(configs) - most} more" if len(configs) > most else "")


def speedup_line(case: TunedCase, chip: str) -> str | None:
    """ "best (512, 1024, 1024): 6,099.4 µs vs the default's 91,836.0 µs (15.1x)"; a best
    that is a tie is said as one; a default without a ratio says why on this line."""
    if chip not in case.best:
        return None
    best = case.candidates[case.best[chip]]
    us = best.chips[chip].modelled_us
    if chip in case.tied:
        text = f"best: {_tie_text(case, chip)}, {us:,.1f} µs"
    else:
        text = f"best {label(best.config)}: {us:,.1f} µs"
    default = case.candidates[case.default_index] if case.default_index is not None else None
    if default is not None and case.default_index in case.tied.get(chip, []):
        return text + f", the default {label(default.config)} among them"
    if default is not None and case.default_index == case.best[chip]:
        return text + " (the default)"
    on = default.chips.get(chip) if default is not None else None
    ranked = on is not None and on.rank is not None
    if default is not None and on is not None and ranked and us > 0:
        text += f" vs the default {label(default.config)}'s {on.modelled_us:,.1f} µs"
        text += f" ({on.modelled_us / us:.1f}x by the model)"
    return text + _default_line(case, chip)


def case_table(case: TunedCase, chips: Sequence[str], top: int) -> str:
    """One case: a header, then per chip the ``top`` candidates and the default."""
    dropped = sum(c.why_not is not None and not c.host_error for c in case.candidates)
    unlowered = sum(c.lowers is False for c in case.candidates)
    hosts = sum(c.host_error for c in case.candidates)
    reused = sum(c.same_as is not None for c in case.candidates)
    host = f", {hosts} host errors (this machine, not the kernel)" if hosts else ""
    lines = [
        f"{case.id}: {case.space} candidates, {dropped} dropped, {unlowered} do not lower"
        f"{host}, {reused} reused an identical program ({case.seconds:.1f} s)"
    ]
    lines += [f"  dropped: {why}" for why in _why_counts(case.candidates)]
    lines += [f"  {note}" for note in case.notes]
    names = list(case.candidates[0].config) if case.candidates else []
    for chip in chips:
        line = speedup_line(case, chip)
        if line is None:
            lines.append(f"  {chip}: no candidate lowers as {chip} and fits")
            continue
        lines.append(f"  {chip}: {line}")
        ranked = sorted(
            (c for c in case.candidates if chip in c.chips and c.chips[chip].rank is not None),
            key=lambda c: (c.chips[chip].rank or 0, not c.default),
        )
        head = ["rank", "(" + ", ".join(names) + ")", f"µs {chip}", "bound", "steps"]
        rows = [[*head, "HBM MiB", "VMEM MiB", "fits"]]
        shared = Counter(c.chips[chip].rank for c in ranked)
        rows += [_row(_mark(c, chip, shared), c, chip) for c in ranked[:top]]
        default = case.candidates[case.default_index] if case.default_index is not None else None
        if default is not None and chip in default.chips and default not in ranked[:top]:
            rank = default.chips[chip].rank
            rows.append(_row(f"{rank or '–'} (default)", default, chip))
        lines += ["    " + row for row in _grid(rows)]
        if any(n > 1 for n in shared.values()):
            lines.append(f"    =: a tie, {TIE_NOTE}")
        unfit = sum(1 for c in case.candidates if chip in c.chips and not c.chips[chip].fits)
        if unfit:
            lines.append(f"    {unfit} candidates do not fit {chip}'s VMEM")
    lines += _measured_lines(case)
    return "\n".join(lines)


def _measured_lines(case: TunedCase) -> list[str]:
    """``--measure``: each timed config's median and its paired ratio to the default."""
    if not case.measured:
        return []
    out = [f"  measured on {case.measured[0].device_kind} ({case.measured[0].samples} rounds):"]
    for m in case.measured:
        text = f"    {label(m.config)}: {m.median_ms:,.3f} ms"
        if m.default:
            text += " (default)"
        elif m.ratio is not None:
            text += f", {m.ratio:.3f}x the default [{m.ci_low:.3f}, {m.ci_high:.3f}]"
            text += f", p = {m.p_value:.3g} that it is faster" if m.p_value is not None else ""
        out.append(text)
    if case.current is not None:
        out.append(
            f"    as it runs now (its tuned entry, else the kernel's fallback): "
            f"{case.current.median_ms:,.3f} ms"
        )
    return out


def tune_table(report: TuneReport, top: int = 10) -> str:
    """The whole search as text."""
    parts = [case_table(case, report.meta.chips, top) for case in report.cases]
    faster = [
        f"- {case.id}: {line}"
        for case in report.cases
        for chip in report.meta.chips
        if (line := faster_tiling(case, chip)) is not None
    ]
    if faster:
        parts.append("\n".join(["Faster than the default by the model (> 5 %):", *faster]))
    meta = report.meta
    parts.append(
        f"{sum(c.space for c in report.cases)} candidates in {meta.seconds:.1f} s on this CPU "
        f"({meta.traced} traced, {meta.reused} reused); chips {', '.join(meta.chips)}; "
        "ranked by the cost model (docs/MODEL.md)"
        + ("" if any(c.measured for c in report.cases) else ", nothing measured")
    )
    return "\n\n".join(parts) + "\n"


def _ms(us: float) -> str:
    return f"{us / 1000:,.1f} ms" if us >= 1000 else f"{us:,.1f} µs"


def faster_tiling(case: TunedCase, chip: str, threshold: float = 1.05) -> str | None:
    """The PR comment's sentence when the model's best config on ``chip`` beats the default
    by more than ``threshold`` (a ratio): "a tiling 15.0x faster by the model exists on
    v5e: (512, 1024, 1024), 6.1 ms vs 91.8 ms"; None otherwise (never a verdict)."""
    if chip not in case.best or case.default_index is None:
        return None
    best = case.candidates[case.best[chip]].chips[chip]
    default = case.candidates[case.default_index].chips.get(chip)
    if default is None or case.default_index in case.tied.get(chip, []):
        return None
    config = case.candidates[case.best[chip]].config
    tied = [case.candidates[i].config for i in case.tied.get(chip, [])]
    return faster_sentence(
        chip, config, best.modelled_us, default.modelled_us, threshold, tied,
        case.tie_knobs.get(chip, ()),
    )  # fmt: skip


def faster_sentence(
    chip: str,
    config: Mapping[str, object],
    best_us: float,
    default_us: float,
    threshold: float,
    tied: Sequence[Mapping[str, object]] = (),
    knobs: Sequence[str] = (),
) -> str | None:
    """``faster_tiling``'s sentence from the figures alone (the lowering file's hint); a
    best that is a tie names the whole set and the knobs the model cannot tell apart, never
    one config of it."""
    if best_us <= 0 or default_us / best_us <= threshold:
        return None
    times = f"{_ms(best_us)} vs {_ms(default_us)}"
    if len(tied) > 1:
        return (
            f"{len(tied)} tilings {default_us / best_us:.1f}x faster by the model exist on "
            f"{chip}, tied (the model cannot tell {', '.join(knobs) or 'them'} apart; "
            f"`ci-bench tune --measure` breaks the tie): {_configs(tied)}, {times}"
        )
    return f"a tiling {default_us / best_us:.1f}x faster by the model exists on {chip}: " + (
        f"{label(config)}, {times}"
    )
