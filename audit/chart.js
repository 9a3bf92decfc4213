// Bar charts for report.html, drawn as inline SVG from the JSON in #chart-data (no library, no network).
// A chart with "scale": "log" draws log10(1 + value), so one faulty copy beside thousands still shows;
// every non-zero bar is at least 3 px high and carries its value as a label.
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  // Faults in warm colours, plain counts in blue and grey.
  var COLORS = {corrupt_copies: "#cf222e", missing_copies: "#bc4c00", orphan_entries: "#8250df", entries: "#0969da",
                orphan_bytes: "#6e7781"};
  function color(s) { return COLORS[s] || "#0969da"; }
  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) { e.setAttribute(k, attrs[k]); }
    if (parent) { parent.appendChild(e); }
    return e;
  }
  // A chart of bytes labels its bars in binary units, as the report's tables do.
  function valueText(spec, v) {
    if (!spec.bytes || v < 1024) { return spec.bytes ? v + " B" : String(v); }
    var units = ["KiB", "MiB", "GiB", "TiB"], u = -1;
    do { v /= 1024; u++; } while (v >= 1024 && u < units.length - 1);
    return v.toFixed(1) + " " + units[u];
  }
  function draw(box, spec) {
    var names = Object.keys(spec.series), n = spec.labels.length, k = names.length;
    var log = spec.scale === "log", f = log ? function (v) { return Math.log10(1 + v); } : function (v) { return v; };
    var W = 560, H = 260, left = 12, bottom = 64, top = 34;
    var max = 0;
    names.forEach(function (s) { spec.series[s].forEach(function (v) { if (f(v) > max) { max = f(v); } }); });
    if (max <= 0) { max = 1; }
    var svg = el("svg", {"class": "bk-chart", viewBox: "0 0 " + W + " " + H, role: "img"}, null);
    el("text", {x: 4, y: 16, "font-size": 13, "font-weight": 600}, svg).textContent = spec.title;
    el("line", {x1: left, y1: H - bottom, x2: W - 4, y2: H - bottom, stroke: "#57606a"}, svg);
    var slot = (W - left - 8) / Math.max(n, 1), bw = Math.max(3, Math.min(40, (slot - 8) / Math.max(k, 1)));
    var drawn = 0;
    spec.labels.forEach(function (label, i) {
      names.forEach(function (s, j) {
        var v = spec.series[s][i], h = v > 0 ? Math.max(3, (H - bottom - top) * f(v) / max) : 0;
        var x = left + i * slot + j * bw, c = color(s);
        if (spec.bad && k === 1) { c = spec.bad[i] ? "#cf222e" : "#1a7f37"; }
        var r = el("rect", {"class": "bar", x: x, y: H - bottom - h, width: bw - 1, height: h, fill: c,
                            "data-value": v}, svg);
        el("title", {}, r).textContent = label + " " + s + ": " + v;
        if (v > 0) {
          el("text", {x: x + (bw - 1) / 2, y: H - bottom - h - 3, "font-size": 10, "text-anchor": "middle"},
             svg).textContent = valueText(spec, v);
        }
        drawn++;
      });
      var t = el("text", {x: left + i * slot + 2, y: H - bottom + 14, "font-size": 10}, svg);
      t.textContent = label.length > 18 ? label.slice(0, 17) + "\u2026" : label;
    });
    names.forEach(function (s, j) {
      var c = (spec.bad && k === 1) ? "#1a7f37" : color(s);
      el("rect", {x: left + j * 150, y: H - 20, width: 10, height: 10, fill: c}, svg);
      el("text", {x: left + j * 150 + 14, y: H - 11, "font-size": 11}, svg).textContent = s.replace(/_/g, " ");
    });
    box.appendChild(svg);
    box.setAttribute("data-drawn", String(drawn));
  }
  var data = JSON.parse(document.getElementById("chart-data").textContent);
  var boxes = document.querySelectorAll("div.chart[data-chart]");
  for (var i = 0; i < boxes.length; i++) { draw(boxes[i], data[boxes[i].getAttribute("data-chart")]); }
})();
