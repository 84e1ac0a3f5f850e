"""The static dashboard: history views -> ``index.html``, ``data.js`` and the assets.

No server and no CDN: the data is a script (``data.js`` sets ``window.CI_BENCH_DATA``),
because browsers refuse ``fetch`` of a JSON file from ``file://``; the charts are drawn
as SVG by ``site_assets/app.js``, hand-written vanilla JS with no dependency.
"""

from __future__ import annotations

import html
import math
from importlib import resources
from typing import Any

import numpy as np

from ci_bench.judge.changepoint import WINDOW, noise_sigma
from ci_bench.report.history import Flag, Group, commit_url, flags_of, pr_url, usable
from ci_bench.schema.base import json_text

# 2: the group's platform and interpreted flag, each flag's status, the page's flag list.
SITE_DATA_VERSION = 2
ASSETS = ("app.js", "style.css")


def _num(value: float | None, digits: int = 6) -> float | None:
    """Rounded for a small file; None where a figure overflowed (JSON has no infinity)."""
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.{digits}g}")


def group_data(group: Group, repo_url: str | None) -> dict[str, Any]:
    commits = [
        {
            "sha": c.sha,
            "time": c.time,
            "version": c.version,
            "source": c.source,
            "tag": c.tag,
            "pr": c.pr,
            "url": commit_url(repo_url, c.sha),
            "pr_url": pr_url(repo_url, c.pr),
            "accepted_by": c.accepted_by,
            "accepted": list(c.accepted),
        }
        for c in group.commits
    ]
    flags = {(f.case, f.x): f for f in flags_of(group)}
    cases = []
    for series in sorted(group.cases.values(), key=lambda s: s.id):
        points = [
            {
                "x": x,
                "median": _num(p.median_ms),
                "q1": _num(p.q1_ms),
                "q3": _num(p.q3_ms),
                "min": _num(p.min_ms),
                "mean": _num(p.mean_ms),
                "tflops": _num(p.tflops),
                "mfu": _num(p.mfu),
                "hbm": _num(p.hbm_utilization),
                "ai": _num(p.arithmetic_intensity),
                "peak_bytes": p.peak_bytes,
                "verdict": p.verdict,
                "status": p.status,
                "flag": flag_data(flags[(series.id, x)]) if (series.id, x) in flags else None,
            }
            for x, p in series.points
        ]
        changes = [
            {
                "x": c.x,
                "sha": c.commit.sha,
                "before": _num(c.point.before),
                "after": _num(c.point.after),
                "change": _num(c.point.change, 4),
            }
            for c in series.changes
        ]
        medians = [p.median_ms for _, p in series.points if usable(p.median_ms)][-WINDOW:]
        noise = noise_sigma(np.log(np.asarray(medians))) if len(medians) >= 3 else None
        cases.append(
            {
                "id": series.id,
                "dtype": series.dtype,
                "shape": series.shape,
                "points": points,
                "changes": changes,
                # The per-commit noise the change-point detector sees (relative): the
                # smallest level change a short history can show is a few times this.
                "noise": _num(math.expm1(noise), 3) if noise is not None else None,
            }
        )
    roofline = []
    newest = {c.version: i for i, c in enumerate(group.commits)}  # one pass, not per version
    at_x = {s.id: dict(s.points) for s in group.cases.values()}
    for _, version in group.boundaries():
        # Each version's roofline is drawn from its newest commit.
        last = newest[version]
        pts = []
        for series in group.cases.values():
            point = at_x[series.id].get(last)
            at = [point] if point and point.tflops and point.arithmetic_intensity else []
            if at:
                pts.append(
                    {
                        "id": series.id,
                        "dtype": series.dtype,
                        "shape": series.shape,
                        "ai": _num(at[0].arithmetic_intensity),
                        "tflops": _num(at[0].tflops),
                    }
                )
        peak_tflops, peak_gbps = group.peaks.get(version, (None, None))
        roofline.append(
            {
                "version": version,
                "commit": group.commits[last].sha,
                "peak_tflops": _num(peak_tflops),
                "peak_gbps": _num(peak_gbps),
                "points": sorted(pts, key=lambda p: p["id"]),
            }
        )
    return {
        "kernel": group.kernel,
        "device": group.device,
        "device_kind": group.device_kind,
        "platform": group.platform,
        "interpreted": group.interpreted,
        "software": group.software,
        "commits": commits,
        "versions": [{"x": x, "version": v} for x, v in group.boundaries()],
        "cases": cases,
        "roofline": roofline,
    }


def flag_data(flag: Flag) -> dict[str, Any]:
    return {
        "verdict": flag.verdict,
        "status": flag.status,
        "change": _num(flag.change, 4),
        "why": flag.why,
    }


def flagged(groups: list[Group], repo_url: str | None) -> list[dict[str, Any]]:
    """Every flagged point of every group, newest first: the page's summary at the top."""
    out = []
    for g in groups:
        for f in flags_of(g):
            out.append(
                {
                    "kernel": g.kernel,
                    "device_kind": g.device_kind,
                    "case": f.case,
                    "x": f.x,
                    "sha": f.commit.sha,
                    "time": f.commit.time,
                    "version": f.commit.version,
                    "url": commit_url(repo_url, f.commit.sha),
                    "pr": f.commit.pr,
                    "pr_url": pr_url(repo_url, f.commit.pr),
                    **flag_data(f),
                }
            )
    return sorted(out, key=lambda f: (f["time"], f["case"]), reverse=True)


def site_data(
    groups: list[Group], *, repo_url: str | None, title: str, generated_at: str
) -> dict[str, Any]:
    return {
        "format": SITE_DATA_VERSION,
        "title": title,
        "generated_at": generated_at,
        "repo_url": repo_url,
        "flagged": flagged(groups, repo_url),
        "groups": [group_data(g, repo_url) for g in groups],
    }


def _asset(name: str) -> str:
    return resources.files("ci_bench.report").joinpath("site_assets", name).read_text("utf-8")


def site_files(
    groups: list[Group], *, repo_url: str | None, title: str, generated_at: str
) -> dict[str, str]:
    """File name -> text of the whole site."""
    data = site_data(groups, repo_url=repo_url, title=title, generated_at=generated_at)
    text = json_text(data, indent=None, compact=True).rstrip("\n")
    page = _asset("index.html").replace("{{TITLE}}", html.escape(title))
    return {
        "index.html": page,
        "data.js": f"window.CI_BENCH_DATA = {text};\n",
        "data.json": text + "\n",
        **{name: _asset(name) for name in ASSETS},
    }
