"""History views: records -> per (kernel, device) series, change points, the CLI table.

Pure: the site (``report.site``) and ``ci-bench history`` both read these views.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import quote

from ci_bench.judge.changepoint import MIN_SIZE, WINDOW, ChangePoint, detect
from ci_bench.schema.history import CasePoint, HistoryRecord

# A run is worth more than a promotion of it, which is worth more than a stored baseline.
_SOURCE_RANK = {"run": 0, "promotion": 1, "baseline": 2}


def latest_per_commit(
    records: Iterable[HistoryRecord], kernel: str | None = None
) -> list[tuple[str, HistoryRecord]]:
    """(kernel, record) once per commit, device and kernel, oldest first: a run before a
    promotion before a baseline entry of the same commit."""
    best: dict[tuple[str, str, str], HistoryRecord] = {}
    for r in records:
        for name in r.kernels:
            if kernel is not None and name != kernel:
                continue
            key = (r.commit, r.device.identity, name)
            if key not in best or _SOURCE_RANK[r.source] < _SOURCE_RANK[best[key].source]:
                best[key] = r
    return sorted(
        ((k[2], r) for k, r in best.items()), key=lambda kr: (kr[1].time, kr[1].commit, kr[0])
    )


@dataclass(frozen=True)
class Commit:
    """An x position of a group's charts."""

    sha: str
    time: str
    version: str
    source: str
    pr: int | None
    tag: str | None
    # Who accepted the merged pull request's regressions, and which cases (format 2).
    accepted_by: str | None = None
    accepted: tuple[str, ...] = ()
    timer: str | None = None  # how its samples were timed (None: not recorded, wallclock)


@dataclass(frozen=True)
class Change:
    case: str
    commit: Commit
    previous: Commit
    point: ChangePoint
    x: int = -1  # the commit's position in its group (no search through the commits)

    @property
    def at_version_boundary(self) -> bool:
        return self.commit.version != self.previous.version


@dataclass
class CaseSeries:
    id: str
    dtype: str
    shape: str
    points: list[tuple[int, CasePoint]] = field(default_factory=list)  # (x, point)
    changes: list[Change] = field(default_factory=list)


@dataclass
class Group:
    """One kernel on one device: the unit of a dashboard section."""

    kernel: str
    device: str
    device_kind: str
    software: str
    commits: list[Commit] = field(default_factory=list)
    cases: dict[str, CaseSeries] = field(default_factory=dict)
    peaks: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    platform: str = ""

    @property
    def interpreted(self) -> bool:
        """A CPU runs Pallas only in interpret mode: its times are the interpreter's."""
        return self.platform == "cpu"

    def boundaries(self) -> list[tuple[int, str]]:
        """(x, version) where a new kernel version starts, the first one included."""
        out: list[tuple[int, str]] = []
        for x, c in enumerate(self.commits):
            if not out or out[-1][1] != c.version:
                out.append((x, c.version))
        return out


def _shape_label(point: CasePoint) -> str:
    return point.id.split("/")[1] if point.id.count("/") >= 2 else "x".join(map(str, point.shape))


def build_groups(records: Iterable[HistoryRecord], kernel: str | None = None) -> list[Group]:
    """Series per (kernel, device), change points included, sorted by kernel and device."""
    groups: dict[tuple[str, str], Group] = {}
    for name, record in latest_per_commit(records, kernel):
        version = record.kernels[name]
        points = [p for p in record.cases if p.kernel == name]
        if points:
            dev = record.device
            group = groups.setdefault(
                (name, dev.identity),
                Group(name, dev.identity, dev.device_kind, dev.software, platform=dev.platform),
            )
            x = len(group.commits)
            group.commits.append(
                Commit(
                    record.commit,
                    record.time.isoformat(),
                    version,
                    record.source,
                    record.pr,
                    record.tag,
                    record.acceptance.by if record.acceptance else None,
                    tuple(record.acceptance.cases) if record.acceptance else (),
                    record.timer or "wallclock",
                )
            )
            group.software = dev.software  # the newest one
            group.peaks[version] = (record.peak_tflops, record.peak_gbps)
            for p in points:
                series = group.cases.setdefault(p.id, CaseSeries(p.id, p.dtype, _shape_label(p)))
                series.points.append((x, p))
    for group in groups.values():
        for series in group.cases.values():
            # Only finite, positive levels go to change-point detection (its log needs them).
            ok = [(x, p) for x, p in series.points if usable(p.median_ms)]
            for run in same_timer_runs(ok, group.commits):
                found = detect([p.median_ms for _, p in run])  # type: ignore[misc]
                for cp in found:
                    x_new, x_old = run[cp.index][0], run[cp.index - 1][0]
                    series.changes.append(
                        Change(series.id, group.commits[x_new], group.commits[x_old], cp, x_new)
                    )
    return [groups[k] for k in sorted(groups)]


def same_timer_runs(
    points: list[tuple[int, CasePoint]], commits: list[Commit]
) -> list[list[tuple[int, CasePoint]]]:
    """The points split where the timer changes: times from two timers are not comparable
    (a TPU's wall clock is mostly the host's round trip), so a switch is never a change
    point and no change point is searched across one."""
    runs: list[list[tuple[int, CasePoint]]] = []
    for x, point in points:
        if runs and commits[runs[-1][-1][0]].timer == commits[x].timer:
            runs[-1].append((x, point))
        else:
            runs.append([(x, point)])
    return runs


def usable(value: float | None) -> bool:
    """A level change-point detection can take: finite and above zero."""
    return value is not None and math.isfinite(value) and value > 0


def finite(value: float | None) -> float | None:
    """``value``, or None when it overflowed (a JSON file holds finite numbers only)."""
    return value if value is None or math.isfinite(value) else None


FlagStatus = Literal["confirmed", "unconfirmed", "pending"]
FLAGGED = ("regression",)


@dataclass(frozen=True)
class Flag:
    """A point the pipeline flagged, and what the commits after it say of the flag."""

    case: str
    x: int
    commit: Commit
    verdict: str
    status: FlagStatus
    change: float | None  # the level change that confirmed it
    why: str


def flags_of(group: Group) -> list[Flag]:
    """Every flagged point of the group, oldest first, judged by the history after it.

    ``confirmed``: a slower level change (PELT) at that commit or the next or previous one;
    ``pending``: fewer than the detector's minimum segment of commits since, so no level
    can be told yet; ``unconfirmed``: enough commits since and the level did not move (a
    flag on noise, or on a commit that changed nothing, such as a documentation edit).
    """
    flags = []
    for series in group.cases.values():
        slower = {c.x: c for c in series.changes if c.point.slower}
        ok_xs = [x for x, p in series.points if usable(p.median_ms)]  # ascending
        searched = ok_xs[-WINDOW] if len(ok_xs) > WINDOW else -1  # oldest x searched
        for x, point in series.points:
            if point.verdict not in FLAGGED:
                continue
            near = [slower[cx] for cx in (x - 1, x, x + 1) if cx in slower]
            after = len(ok_xs) - bisect.bisect_left(ok_xs, x)
            before = len(ok_xs) - after
            if near:
                status: FlagStatus = "confirmed"
                change: float | None = near[0].point.change
                why = f"the level moved {change:+.1%} there and held"
            elif after < MIN_SIZE:
                status, change = "pending", None
                why = f"needs {MIN_SIZE - after} more commit(s) to tell a level from one point"
            elif x < searched:
                status, change = "unconfirmed", None
                why = f"older than the newest {WINDOW} commits searched for level changes"
            elif before < MIN_SIZE:
                status, change = "unconfirmed", None
                why = "too few commits before it to tell a level change"
            else:
                status, change = "unconfirmed", None
                why = f"the {after - 1} commit(s) after it show no level change"
            flags.append(Flag(series.id, x, group.commits[x], point.verdict, status, change, why))
    return sorted(flags, key=lambda f: (f.x, f.case))


def commit_url(repo_url: str | None, sha: str) -> str | None:
    """The commit's page; the commit string is percent-encoded whole (a history record's
    commit comes from a results file, which a fork may have written: never a path, a query
    or a fragment of the link)."""
    return f"{repo_url.rstrip('/')}/commit/{quote(str(sha), safe='')}" if repo_url else None


def pr_url(repo_url: str | None, number: int | None) -> str | None:
    return f"{repo_url.rstrip('/')}/pull/{int(number)}" if repo_url and number else None


def changes_text(groups: list[Group], repo_url: str | None) -> str:
    """``ci-bench history``: one line per change point, newest history last."""
    lines = []
    for group in groups:
        changes = sorted(
            (c for s in group.cases.values() for c in s.changes),
            key=lambda c: (c.x, c.case),
        )
        head = f"{group.kernel} on {group.device}: {len(group.commits)} commits"
        lines.append(f"{head}, {len(changes)} level change(s)")
        for c in changes:
            word = "slower" if c.point.slower else "faster"
            link = commit_url(repo_url, c.commit.sha) or c.commit.sha
            pr = f" (PR #{c.commit.pr})" if c.commit.pr else ""
            if c.commit.accepted_by:
                pr += f" (accepted by @{c.commit.accepted_by})"
            boundary = (
                f"  [version {c.previous.version} -> {c.commit.version}]"
                if c.at_version_boundary
                else ""
            )
            lines.append(
                f"  {c.case}: {c.point.before:.4g} -> {c.point.after:.4g} ms "
                f"({c.point.change:+.1%}, {word}) at {c.commit.sha[:12]}{pr} "
                f"after {c.previous.sha[:12]}{boundary}\n    {link}"
            )
    return "\n".join(lines) + "\n"
