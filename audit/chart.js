// Bar charts for report.html, drawn as inline SVG from the JSON in #chart-data (no library, no network).
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var COLORS = ["#4e79a7", "#e15759", "#f28e2b", "#76b7b2", "#59a14f"];
  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) { e.setAttribute(k, attrs[k]); }
    if (parent) { parent.appendChild(e); }
    return e;
  }
  function draw(box, spec) {
    var names = Object.keys(spec.series), n = spec.labels.length, k = names.length;
    var W = Math.max(360, n * (k * 18 + 30) + 80), H = 240, left = 60, bottom = 60, top = 30;
    var max = 1;
    names.forEach(function (s) { spec.series[s].forEach(function (v) { if (v > max) { max = v; } }); });
    var svg = el("svg", {"class": "bk-chart", width: W, height: H, viewBox: "0 0 " + W + " " + H}, null);
    el("text", {x: 4, y: 16, "font-size": 13}, svg).textContent = spec.title;
    el("line", {x1: left, y1: H - bottom, x2: W - 10, y2: H - bottom, stroke: "#333"}, svg);
    el("text", {x: 4, y: top + 8, "font-size": 10}, svg).textContent = String(max);
    var slot = (W - left - 20) / Math.max(n, 1), bw = Math.max(4, (slot - 10) / k);
    spec.labels.forEach(function (label, i) {
      names.forEach(function (s, j) {
        var v = spec.series[s][i], h = (H - bottom - top) * v / max;
        var r = el("rect", {"class": "bar", x: left + i * slot + j * bw, y: H - bottom - h, width: bw - 1,
                            height: h, fill: COLORS[j % COLORS.length]}, svg);
        el("title", {}, r).textContent = label + " " + s + ": " + v;
      });
      el("text", {x: left + i * slot, y: H - bottom + 14, "font-size": 10}, svg).textContent = label;
    });
    names.forEach(function (s, j) {
      el("rect", {x: left + j * 130, y: H - 18, width: 10, height: 10, fill: COLORS[j % COLORS.length]}, svg);
      el("text", {x: left + j * 130 + 14, y: H - 9, "font-size": 11}, svg).textContent = s;
    });
    box.appendChild(svg);
    box.setAttribute("data-drawn", String(n * k));
  }
  var data = JSON.parse(document.getElementById("chart-data").textContent);
  var boxes = document.querySelectorAll("div.chart[data-chart]");
  for (var i = 0; i < boxes.length; i++) { draw(boxes[i], data[boxes[i].getAttribute("data-chart")]); }
})();
