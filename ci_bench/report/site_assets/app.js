// ci-bench dashboard: draws window.CI_BENCH_DATA (data.js) as SVG. Vanilla JS, no library,
// no network: the page works from file:// and from GitHub Pages alike.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var DATA = window.CI_BENCH_DATA;
  var DTYPE_COLORS = ["#0969da", "#bc4c00", "#1a7f37", "#8250df", "#cf222e", "#6e7781"];

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function sv(tag, attrs, text) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function fmt(v, digits) {
    if (v === null || v === undefined) return "–";
    return Number(v).toPrecision(digits || 4).replace(/\.?0+$/, "").replace(/\.?0+e/, "e");
  }
  function pct(v) { return v === null || v === undefined ? "–" : (v * 100).toFixed(1) + " %"; }
  function short(sha) { return sha.slice(0, 8); }
  function link(href, text) {
    if (!href) return el("span", {}, text);
    return el("a", { href: href, target: "_blank", rel: "noopener" }, text);
  }
  function linear(d0, d1, r0, r1) {
    var span = d1 - d0 || 1;
    return function (v) { return r0 + (v - d0) / span * (r1 - r0); };
  }

  // Round axis ticks (1, 2, 2.5, 5 × 10^k) from lo to hi, about ``count`` of them.
  function ticks(lo, hi, count) {
    var raw = (hi - lo) / count, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    var unit = [1, 2, 2.5, 5, 10].map(function (m) { return m * mag; })
      .filter(function (u) { return u >= raw; })[0];
    var out = [];
    for (var v = Math.ceil(lo / unit - 1e-9) * unit; v <= hi + unit * 1e-9; v += unit) out.push(v);
    return out;
  }

  // The y values of one case under a scale. "ms": the median time, on an axis from 0, so
  // a level's size is its height and ±2 % of noise is 2 % of the chart. "delta": the change
  // against the first measured commits of the same version, on an axis spanning at least
  // ±20 %, so noise is never stretched over the chart's height.
  var SCALES = {
    ms: { label: "ms, axis from 0", floor: 0 },
    delta: { label: "Δ % vs the version's first 3 commits (axis ≥ ±20 %)", floor: 0.2 },
  };
  // A version's reference level: the median of its first three measured commits, so one
  // noisy first commit does not shift the whole version off zero.
  function reference(group, c, version) {
    var first = c.points.filter(function (p) {
      return p.median !== null && group.commits[p.x].version === version;
    }).slice(0, 3).map(function (p) { return p.median; }).sort(function (a, b) { return a - b; });
    return first[Math.floor(first.length / 2)];
  }
  function scaled(group, c, scale) {
    var ref = {};
    return c.points.filter(function (p) { return p.median !== null; }).map(function (p) {
      var version = group.commits[p.x].version;
      if (scale === "ms") return { p: p, y: p.median, y1: p.q1, y3: p.q3, version: version };
      var r = ref[version] || (ref[version] = reference(group, c, version));
      var rel = function (v) { return v === null ? null : v / r - 1; };
      return { p: p, y: rel(p.median), y1: rel(p.q1), y3: rel(p.q3), version: version };
    });
  }
  function yRange(values, scale) {
    var lo = Infinity, hi = -Infinity;
    values.forEach(function (v) {
      [v.y, v.y1, v.y3].forEach(function (y) {
        if (y !== null) { lo = Math.min(lo, y); hi = Math.max(hi, y); }
      });
    });
    if (scale === "ms") return [0, isFinite(hi) && hi > 0 ? hi * 1.1 : 1];
    var f = SCALES.delta.floor;
    if (!isFinite(lo)) return [-f, f];
    return [Math.min(-f, lo * 1.1), Math.max(f, hi * 1.1)];
  }
  var FLAG_TEXT = {
    confirmed: "confirmed regression",
    unconfirmed: "flagged, not confirmed by the history",
    pending: "flagged, not yet confirmed (too few commits since)",
  };

  // One case's trend: medians over commits, the quartile band, version boundaries,
  // change points and the pipeline's flags (confirmed, unconfirmed or pending).
  function trendChart(group, c, scale) {
    var W = 560, H = 210, L = 58, R = 14, T = 30, B = 34;
    var n = group.commits.length;
    var ok = scaled(group, c, scale), range = yRange(ok, scale);
    var lo = range[0], hi = range[1];
    var x = linear(0, Math.max(n - 1, 1), L, W - R), y = linear(lo, hi, H - B, T);
    var svg = sv("svg", { class: "trend-chart", width: W, height: H, viewBox: "0 0 " + W + " " + H,
      "data-scale": scale, "data-ymin": lo, "data-ymax": hi,
      role: "img", "aria-label": c.id + " median time per commit (" + SCALES[scale].label + ")" });
    ticks(lo, hi, 4).forEach(function (v) {
      svg.appendChild(sv("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
      var text = scale === "ms" ? fmt(v, 3) : (v > 0 ? "+" : "") + (v * 100).toFixed(0) + "%";
      svg.appendChild(sv("text", { class: "ytick", x: L - 4, y: y(v) + 3, "text-anchor": "end" }, text));
    });
    if (scale === "delta") {
      svg.appendChild(sv("line", { class: "zero", x1: L, x2: W - R, y1: y(0), y2: y(0) }));
    }
    svg.appendChild(sv("text", { class: "ylabel", x: 4, y: 11 }, SCALES[scale].label +
      (group.interpreted ? " · CPU interpreter's times" : "")));
    svg.appendChild(sv("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
    svg.appendChild(sv("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
    var step = Math.max(1, Math.ceil(n / 6));
    for (var k = 0; k < n; k += step) {
      var anchor = k === 0 && x(k) - 24 < 0 ? "start" : "middle";
      svg.appendChild(sv("text", { class: "xtick", x: x(k), y: H - B + 14, "text-anchor": anchor },
        short(group.commits[k].sha)));
    }
    svg.appendChild(sv("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" },
      "commits, oldest first (" + n + ")"));
    // The band and the line restart at each version in the delta scale (its reference does).
    var runs = [];
    ok.forEach(function (v, i) {
      if (!i || (scale === "delta" && v.version !== ok[i - 1].version)) runs.push([]);
      runs[runs.length - 1].push(v);
    });
    runs.forEach(function (run) {
      var banded = run.filter(function (v) { return v.y1 !== null && v.y3 !== null; });
      if (banded.length > 1) {
        var top = banded.map(function (v) { return x(v.p.x) + "," + y(v.y3); });
        var bottom = banded.slice().reverse().map(function (v) { return x(v.p.x) + "," + y(v.y1); });
        svg.appendChild(sv("polygon", { class: "band", points: top.concat(bottom).join(" ") }));
      }
    });
    group.versions.forEach(function (b) {
      var bx = b.x === 0 ? x(0) : (x(b.x) + x(b.x - 1)) / 2;
      if (b.x > 0) svg.appendChild(sv("line", { class: "vboundary", x1: bx, x2: bx, y1: T - 10, y2: H - B }));
      var right = bx > W - R - 60;
      svg.appendChild(sv("text", { class: "vlabel", x: right ? bx - 3 : bx + 3, y: T - 4,
        "text-anchor": right ? "end" : "start" }, "v" + b.version));
    });
    c.changes.forEach(function (cp) {
      var cx = (x(cp.x) + x(Math.max(cp.x - 1, 0))) / 2;
      svg.appendChild(sv("line", { class: "changepoint", x1: cx, x2: cx, y1: T, y2: H - B }));
      var left = cx > (L + W - R) / 2;  // the label on the side with room
      svg.appendChild(sv("text", { class: "cplabel", x: left ? cx - 3 : cx + 3, y: T + 10,
        "text-anchor": left ? "end" : "start" },
        (cp.change > 0 ? "+" : "") + (cp.change * 100).toFixed(1) + "% @" + short(cp.sha)));
    });
    runs.forEach(function (run) {
      if (run.length > 1) {
        svg.appendChild(sv("polyline", { class: "trend",
          points: run.map(function (v) { return x(v.p.x) + "," + y(v.y); }).join(" ") }));
      }
    });
    ok.forEach(function (v) {
      var p = v.p, commit = group.commits[p.x];
      var dot = sv("circle", { class: "pt", cx: x(p.x), cy: y(v.y), r: 3, "data-sha": commit.sha });
      dot.appendChild(sv("title", {}, short(commit.sha) + " v" + commit.version +
        "\nmedian " + fmt(p.median) + " ms (IQR " + fmt(p.q1) + "–" + fmt(p.q3) + ")" +
        (group.interpreted ? " — CPU interpreter's time" : "") +
        "\nTFLOPS " + fmt(p.tflops) + (group.interpreted ? " (interpreter)" : "") +
        (p.verdict ? "\nverdict " + p.verdict : "")));
      if (commit.url) {
        var a = sv("a", { href: commit.url, target: "_blank" });
        a.appendChild(dot);
        svg.appendChild(a);
      } else {
        svg.appendChild(dot);
      }
      if (p.flag) {
        var px = x(p.x), py = Math.max(y(v.y) - 7, T + 2);
        var marker = sv("polygon", { class: "regression-marker " + p.flag.status,
          "data-status": p.flag.status, "data-sha": commit.sha,
          points: (px - 5) + "," + (py - 8) + " " + (px + 5) + "," + (py - 8) + " " + px + "," + py });
        marker.appendChild(sv("title", {}, p.flag.verdict + " at " + short(commit.sha) + ": " +
          FLAG_TEXT[p.flag.status] + " (" + p.flag.why + ")"));
        svg.appendChild(marker);
      }
    });
    return svg;
  }

  // One version's roofline: log-log arithmetic intensity against TFLOPS, roofs if known.
  function rooflineChart(group, roof, colors) {
    var W = 300, H = 200, L = 46, R = 10, T = 28, B = 30;
    var pts = roof.points;
    var ais = pts.map(function (p) { return p.ai; }), tfs = pts.map(function (p) { return p.tflops; });
    if (roof.peak_tflops && roof.peak_gbps) {
      ais.push(roof.peak_tflops * 1000 / roof.peak_gbps);
      tfs.push(roof.peak_tflops);
    }
    var svg = sv("svg", { class: "roofline-chart", width: W, height: H, viewBox: "0 0 " + W + " " + H,
      role: "img", "aria-label": "roofline of v" + roof.version });
    svg.appendChild(sv("text", { class: "vlabel", x: W - R, y: 12, "text-anchor": "end" },
      "v" + roof.version + " @" + short(roof.commit)));
    if (!pts.length) {
      svg.appendChild(sv("text", { x: L, y: H / 2 }, "no roofline figures"));
      return svg;
    }
    var lx0 = Math.log10(Math.min.apply(null, ais)) - 0.3, lx1 = Math.log10(Math.max.apply(null, ais)) + 0.3;
    var ly0 = Math.log10(Math.min.apply(null, tfs)) - 0.3, ly1 = Math.log10(Math.max.apply(null, tfs)) + 0.3;
    var x = linear(lx0, lx1, L, W - R), y = linear(ly0, ly1, H - B, T);
    svg.appendChild(sv("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
    svg.appendChild(sv("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
    svg.appendChild(sv("text", { x: (L + W) / 2, y: H - 4, "text-anchor": "middle" }, "FLOP/byte (log)"));
    svg.appendChild(sv("text", { x: 2, y: T - 12 }, group.interpreted ? "TFLOPS (interp.)" : "TFLOPS"));
    [[lx0, "start"], [lx1, "end"]].forEach(function (tick) {
      svg.appendChild(sv("text", { x: x(tick[0]), y: H - B + 12, "text-anchor": tick[1] },
        fmt(Math.pow(10, tick[0]), 2)));
    });
    [ly0, ly1].forEach(function (v) {
      svg.appendChild(sv("text", { x: L - 3, y: y(v) + 3, "text-anchor": "end" }, fmt(Math.pow(10, v), 2)));
    });
    if (roof.peak_tflops && roof.peak_gbps) {
      var ridge = Math.log10(roof.peak_tflops * 1000 / roof.peak_gbps), top = Math.log10(roof.peak_tflops);
      var memAt = function (lx) { return Math.log10(Math.pow(10, lx) * roof.peak_gbps / 1000); };
      svg.appendChild(sv("polyline", { class: "roof", points: [x(lx0) + "," + y(memAt(lx0)),
        x(ridge) + "," + y(top), x(lx1) + "," + y(top)].join(" ") }));
    }
    pts.forEach(function (p) {
      var dot = sv("circle", { class: "roof-pt", cx: x(Math.log10(p.ai)), cy: y(Math.log10(p.tflops)),
        r: 4, fill: colors[p.dtype] || "#0969da", "data-dtype": p.dtype, "data-shape": p.shape });
      dot.appendChild(sv("title", {}, p.id + "\n" + fmt(p.ai) + " FLOP/B, " + fmt(p.tflops) + " TFLOPS"));
      svg.appendChild(dot);
    });
    return svg;
  }

  function caseTable(group) {
    var table = el("table", { class: "history-table" });
    var head = el("tr");
    var mark = group.interpreted ? "†" : "";
    ["case", "commit", "version", "PR", "median ms" + mark, "Q1" + mark, "Q3" + mark, "min" + mark,
      "TFLOPS" + mark, "MFU" + mark, "HBM" + mark, "verdict"].forEach(function (h, i) {
      head.appendChild(el("th", { class: i < 2 ? "l" : "" }, h));
    });
    table.appendChild(head);
    group.cases.forEach(function (c) {
      c.points.forEach(function (p) {
        var commit = group.commits[p.x];
        var tr = el("tr", { "data-dtype": c.dtype, "data-shape": c.shape });
        tr.appendChild(el("td", { class: "l" }, c.id));
        var td = el("td", { class: "l" });
        td.appendChild(link(commit.url, short(commit.sha)));
        tr.appendChild(td);
        tr.appendChild(el("td", {}, commit.version));
        var prCell = el("td");
        if (commit.pr) prCell.appendChild(link(commit.pr_url, "#" + commit.pr));
        if (commit.accepted_by) prCell.appendChild(el("span", { class: "accepted" }, " accepted by @" + commit.accepted_by));
        tr.appendChild(prCell);
        [p.median, p.q1, p.q3, p.min, p.tflops].forEach(function (v) { tr.appendChild(el("td", {}, fmt(v))); });
        tr.appendChild(el("td", {}, pct(p.mfu)));
        tr.appendChild(el("td", {}, pct(p.hbm)));
        var verdict = p.status === "error" ? "error" : (p.verdict || "");
        if (p.flag) verdict += " (" + p.flag.status + ")";
        tr.appendChild(el("td", { class: (p.verdict || "") + (p.flag ? " " + p.flag.status : "") }, verdict));
        table.appendChild(tr);
      });
    });
    return table;
  }

  var INTERPRETER = "CPU interpreter — times are not kernel performance";
  function interpreterBanner() {
    return el("p", { class: "interp-banner", id: "interp-banner" }, INTERPRETER + ": Pallas ran " +
      "with interpret=True, so the times, TFLOPS, MFU and HBM figures of the groups marked † " +
      "are the interpreter's, not the kernel's.");
  }
  function currentScale() { return document.getElementById("f-scale").value; }

  // Every point the pipeline flagged, newest first, with what the history after it says.
  function flaggedSummary() {
    var box = el("section", { class: "flagged", id: "flagged" });
    var flags = DATA.flagged || [];
    var counts = { confirmed: 0, unconfirmed: 0, pending: 0 };
    flags.forEach(function (f) { counts[f.status] += 1; });
    box.appendChild(el("h2", {}, flags.length ? "Flagged: " + counts.confirmed + " confirmed, " +
      counts.unconfirmed + " not confirmed, " + counts.pending + " pending" : "Nothing flagged"));
    if (!flags.length) {
      box.appendChild(el("p", {}, "No commit in this history was flagged by the pipeline."));
      return box;
    }
    var table = el("table", { class: "flag-table" });
    var head = el("tr");
    ["", "status", "case", "kernel on", "commit", "PR", "version", "what the history says"]
      .forEach(function (h) { head.appendChild(el("th", { class: "l" }, h)); });
    table.appendChild(head);
    flags.forEach(function (f) {
      var tr = el("tr", { class: "flag " + f.status, "data-status": f.status, "data-sha": f.sha });
      tr.appendChild(el("td", { class: "l marker " + f.status }, f.status === "confirmed" ? "▼" : "▽"));
      tr.appendChild(el("td", { class: "l" }, FLAG_TEXT[f.status]));
      tr.appendChild(el("td", { class: "l" }, f.case));
      tr.appendChild(el("td", { class: "l" }, f.kernel + " · " + f.device_kind));
      var commit = el("td", { class: "l" });
      commit.appendChild(link(f.url, short(f.sha)));
      tr.appendChild(commit);
      var pr = el("td", { class: "l" });
      if (f.pr) pr.appendChild(link(f.pr_url, "#" + f.pr));
      tr.appendChild(pr);
      tr.appendChild(el("td", { class: "l" }, "v" + f.version));
      tr.appendChild(el("td", { class: "l" }, f.why));
      table.appendChild(tr);
    });
    box.appendChild(table);
    return box;
  }

  function redrawTrends() {
    DATA.groups.forEach(function (g, gi) {
      var section = document.querySelectorAll("section.group")[gi];
      g.cases.forEach(function (c) {
        section.querySelectorAll(".card.case").forEach(function (card) {
          if (card.getAttribute("data-case") !== c.id) return;
          var old = card.querySelector("svg.trend-chart");
          card.replaceChild(trendChart(g, c, currentScale()), old);
        });
      });
    });
    applyFilters();
  }

  function render() {
    var app = document.getElementById("app");
    app.textContent = "";
    var meta = document.getElementById("meta");
    meta.textContent = "generated " + DATA.generated_at + " · " + DATA.groups.length +
      " kernel/device group(s) · ";
    if (DATA.repo_url) meta.appendChild(link(DATA.repo_url, DATA.repo_url));
    var dtypes = {};
    DATA.groups.forEach(function (g) { g.cases.forEach(function (c) { dtypes[c.dtype] = true; }); });
    var colors = {};
    Object.keys(dtypes).sort().forEach(function (d, i) {
      colors[d] = DTYPE_COLORS[i % DTYPE_COLORS.length];
      document.getElementById("f-dtype").appendChild(el("option", { value: d }, d));
    });
    if (DATA.groups.some(function (g) { return g.interpreted; })) app.appendChild(interpreterBanner());
    app.appendChild(flaggedSummary());
    if (!DATA.groups.length) app.appendChild(el("p", {}, "No history yet."));
    DATA.groups.forEach(function (g) {
      var section = el("section", { class: "group", "data-kernel": g.kernel, "data-device": g.device });
      section.appendChild(el("h2", {}, g.kernel + " on " + g.device_kind));
      section.appendChild(el("p", { class: "group-meta" }, g.device + " · " + g.software + " · " +
        g.commits.length + " commits · versions " + g.versions.map(function (v) { return "v" + v.version; }).join(" → ")));
      if (g.interpreted) {
        section.appendChild(el("p", { class: "interp-note" }, INTERPRETER + " (" + g.platform +
          "): every time, TFLOPS, MFU and HBM figure below (†) is the interpreter's."));
      }
      var changes = [];
      g.cases.forEach(function (c) { c.changes.forEach(function (cp) { changes.push([c, cp]); }); });
      if (changes.length) {
        var ul = el("ul", { class: "changes" });
        changes.forEach(function (pair) {
          var li = el("li", { "data-dtype": pair[0].dtype, "data-shape": pair[0].shape });
          var commit = g.commits[pair[1].x];
          li.appendChild(el("span", {}, pair[0].id + ": " + fmt(pair[1].before) + " → " + fmt(pair[1].after) +
            " ms (" + (pair[1].change > 0 ? "+" : "") + (pair[1].change * 100).toFixed(1) + " %) at "));
          li.appendChild(link(commit.url, short(commit.sha)));
          if (commit.pr) { li.appendChild(el("span", {}, " ")); li.appendChild(link(commit.pr_url, "#" + commit.pr)); }
          if (commit.accepted_by) li.appendChild(el("span", { class: "accepted" }, " (accepted by @" + commit.accepted_by + ")"));
          ul.appendChild(li);
        });
        section.appendChild(ul);
      }
      var charts = el("div", { class: "view-charts" });
      var roofs = el("div", { class: "cards rooflines" });
      g.roofline.forEach(function (r) {
        var card = el("div", { class: "card roofline" });
        card.appendChild(rooflineChart(g, r, colors));
        roofs.appendChild(card);
      });
      charts.appendChild(roofs);
      var legend = el("p", { class: "dtype-legend" });
      Object.keys(colors).forEach(function (d) {
        legend.appendChild(el("span", { class: "swatch", style: "background:" + colors[d] }));
        legend.appendChild(el("span", {}, d + " "));
      });
      charts.appendChild(legend);
      var cards = el("div", { class: "cards" });
      g.cases.forEach(function (c) {
        var card = el("div", { class: "card case", "data-case": c.id, "data-dtype": c.dtype, "data-shape": c.shape });
        card.appendChild(el("h3", {}, c.id));
        card.appendChild(trendChart(g, c, currentScale()));
        if (c.noise !== null) {
          card.appendChild(el("p", { class: "noise" }, "per-commit noise ≈ " + pct(c.noise) +
            " (what the change-point detector sees)"));
        }
        cards.appendChild(card);
      });
      charts.appendChild(cards);
      section.appendChild(charts);
      var tables = el("div", { class: "view-table hidden-view" });
      tables.appendChild(caseTable(g));
      section.appendChild(tables);
      app.appendChild(section);
    });
  }

  function applyFilters() {
    var dtype = document.getElementById("f-dtype").value;
    var shape = document.getElementById("f-shape").value.trim().toLowerCase();
    var view = document.getElementById("f-view").value;
    var shown = 0, total = 0;
    document.querySelectorAll("[data-dtype]").forEach(function (node) {
      var match = (!dtype || node.getAttribute("data-dtype") === dtype) &&
        (!shape || node.getAttribute("data-shape").toLowerCase().indexOf(shape) >= 0);
      if (node.tagName.toLowerCase() === "circle") {
        node.style.display = match ? "" : "none";
      } else {
        node.hidden = !match;
      }
      if (node.classList.contains("case")) { total += 1; if (match) shown += 1; }
    });
    document.querySelectorAll(".view-charts").forEach(function (n) { n.classList.toggle("hidden-view", view !== "charts"); });
    document.querySelectorAll(".view-table").forEach(function (n) { n.classList.toggle("hidden-view", view !== "table"); });
    document.getElementById("f-count").textContent = shown + " of " + total + " cases";
  }

  render();
  document.getElementById("f-scale").addEventListener("change", redrawTrends);
  ["f-dtype", "f-shape", "f-view"].forEach(function (id) {
    document.getElementById(id).addEventListener("input", applyFilters);
    document.getElementById(id).addEventListener("change", applyFilters);
  });
  applyFilters();
})();
