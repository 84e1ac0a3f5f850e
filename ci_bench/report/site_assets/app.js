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

  // One case's trend: medians over commits, the quartile band, version boundaries,
  // change points and regression markers.
  function trendChart(group, c) {
    var W = 560, H = 210, L = 58, R = 12, T = 18, B = 34;
    var n = group.commits.length;
    var ok = c.points.filter(function (p) { return p.median !== null; });
    var lo = Infinity, hi = -Infinity;
    ok.forEach(function (p) {
      lo = Math.min(lo, p.q1 !== null ? p.q1 : p.median, p.median);
      hi = Math.max(hi, p.q3 !== null ? p.q3 : p.median, p.median);
    });
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    var pad = (hi - lo) * 0.08 || Math.abs(hi) * 0.05 || 1;
    lo -= pad; hi += pad;
    var x = linear(0, Math.max(n - 1, 1), L, W - R), y = linear(lo, hi, H - B, T);
    var svg = sv("svg", { class: "trend-chart", width: W, height: H, viewBox: "0 0 " + W + " " + H,
      role: "img", "aria-label": c.id + " median time per commit" });
    for (var i = 0; i <= 4; i++) {
      var v = lo + (hi - lo) * i / 4;
      svg.appendChild(sv("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
      svg.appendChild(sv("text", { x: L - 4, y: y(v) + 3, "text-anchor": "end" }, fmt(v, 3)));
    }
    svg.appendChild(sv("text", { x: 4, y: 11 }, "ms"));
    svg.appendChild(sv("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
    svg.appendChild(sv("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
    var step = Math.max(1, Math.ceil(n / 6));
    for (var k = 0; k < n; k += step) {
      svg.appendChild(sv("text", { x: x(k), y: H - B + 14, "text-anchor": "middle" },
        short(group.commits[k].sha)));
    }
    svg.appendChild(sv("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" },
      "commits, oldest first (" + n + ")"));
    var banded = ok.filter(function (p) { return p.q1 !== null && p.q3 !== null; });
    if (banded.length > 1) {
      var top = banded.map(function (p) { return x(p.x) + "," + y(p.q3); });
      var bottom = banded.slice().reverse().map(function (p) { return x(p.x) + "," + y(p.q1); });
      svg.appendChild(sv("polygon", { class: "band", points: top.concat(bottom).join(" ") }));
    }
    group.versions.forEach(function (b) {
      var bx = b.x === 0 ? x(0) : (x(b.x) + x(b.x - 1)) / 2;
      if (b.x > 0) svg.appendChild(sv("line", { class: "vboundary", x1: bx, x2: bx, y1: T - 8, y2: H - B }));
      svg.appendChild(sv("text", { class: "vlabel", x: bx + 3, y: T - 2 }, "v" + b.version));
    });
    c.changes.forEach(function (cp) {
      var cx = (x(cp.x) + x(Math.max(cp.x - 1, 0))) / 2;
      svg.appendChild(sv("line", { class: "changepoint", x1: cx, x2: cx, y1: T, y2: H - B }));
      var label = sv("text", { class: "cplabel", x: cx - 3, y: T + 10, "text-anchor": "end" },
        (cp.change > 0 ? "+" : "") + (cp.change * 100).toFixed(1) + "% @" + short(cp.sha));
      svg.appendChild(label);
    });
    if (ok.length > 1) {
      svg.appendChild(sv("polyline", { class: "trend",
        points: ok.map(function (p) { return x(p.x) + "," + y(p.median); }).join(" ") }));
    }
    ok.forEach(function (p) {
      var commit = group.commits[p.x];
      var dot = sv("circle", { class: "pt", cx: x(p.x), cy: y(p.median), r: 3,
        "data-sha": commit.sha });
      dot.appendChild(sv("title", {}, short(commit.sha) + " v" + commit.version +
        "\nmedian " + fmt(p.median) + " ms (IQR " + fmt(p.q1) + "–" + fmt(p.q3) + ")" +
        "\nTFLOPS " + fmt(p.tflops) + (p.verdict ? "\nverdict " + p.verdict : "")));
      if (commit.url) {
        var a = sv("a", { href: commit.url, target: "_blank" });
        a.appendChild(dot);
        svg.appendChild(a);
      } else {
        svg.appendChild(dot);
      }
      if (p.verdict === "regression") {
        var px = x(p.x), py = y(p.median) - 7;
        svg.appendChild(sv("polygon", { class: "regression-marker",
          points: (px - 5) + "," + (py - 8) + " " + (px + 5) + "," + (py - 8) + " " + px + "," + py }));
      }
    });
    return svg;
  }

  // One version's roofline: log-log arithmetic intensity against TFLOPS, roofs if known.
  function rooflineChart(group, roof, colors) {
    var W = 300, H = 200, L = 46, R = 10, T = 20, B = 30;
    var pts = roof.points;
    var ais = pts.map(function (p) { return p.ai; }), tfs = pts.map(function (p) { return p.tflops; });
    if (roof.peak_tflops && roof.peak_gbps) {
      ais.push(roof.peak_tflops * 1000 / roof.peak_gbps);
      tfs.push(roof.peak_tflops);
    }
    var svg = sv("svg", { class: "roofline-chart", width: W, height: H, viewBox: "0 0 " + W + " " + H,
      role: "img", "aria-label": "roofline of v" + roof.version });
    svg.appendChild(sv("text", { class: "vlabel", x: L, y: 12 }, "v" + roof.version + " @" + short(roof.commit)));
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
    svg.appendChild(sv("text", { x: 2, y: T - 6 }, "TFLOPS"));
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
    Object.keys(colors).forEach(function (d, i) {
      svg.appendChild(sv("circle", { cx: 165 + 66 * i, cy: 8, r: 4, fill: colors[d] }));
      svg.appendChild(sv("text", { x: 172 + 66 * i, y: 11 }, d));
    });
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
    ["case", "commit", "version", "PR", "median ms", "Q1", "Q3", "min", "TFLOPS", "MFU", "HBM",
      "verdict"].forEach(function (h, i) { head.appendChild(el("th", { class: i < 2 ? "l" : "" }, h)); });
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
        tr.appendChild(prCell);
        [p.median, p.q1, p.q3, p.min, p.tflops].forEach(function (v) { tr.appendChild(el("td", {}, fmt(v))); });
        tr.appendChild(el("td", {}, pct(p.mfu)));
        tr.appendChild(el("td", {}, pct(p.hbm)));
        tr.appendChild(el("td", { class: p.verdict || "" }, p.status === "error" ? "error" : (p.verdict || "")));
        table.appendChild(tr);
      });
    });
    return table;
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
    if (!DATA.groups.length) app.appendChild(el("p", {}, "No history yet."));
    DATA.groups.forEach(function (g) {
      var section = el("section", { class: "group", "data-kernel": g.kernel, "data-device": g.device });
      section.appendChild(el("h2", {}, g.kernel + " on " + g.device_kind));
      section.appendChild(el("p", { class: "group-meta" }, g.device + " · " + g.software + " · " +
        g.commits.length + " commits · versions " + g.versions.map(function (v) { return "v" + v.version; }).join(" → ")));
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
      var cards = el("div", { class: "cards" });
      g.cases.forEach(function (c) {
        var card = el("div", { class: "card case", "data-case": c.id, "data-dtype": c.dtype, "data-shape": c.shape });
        card.appendChild(el("h3", {}, c.id));
        card.appendChild(trendChart(g, c));
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
  ["f-dtype", "f-shape", "f-view"].forEach(function (id) {
    document.getElementById(id).addEventListener("input", applyFilters);
    document.getElementById(id).addEventListener("change", applyFilters);
  });
  applyFilters();
})();
