// Plots each metric a job logs (nightshift.log) against step, as dependency-free SVG,
// refreshing while the job runs.
(function () {
  "use strict";
  const box = document.querySelector("[data-role=metrics]");
  if (!box) return;
  const url = box.dataset.metricsUrl;
  const SVG = "http://www.w3.org/2000/svg";
  const W = 460, H = 220, PAD = { l: 52, r: 12, t: 12, b: 30 };
  const COLORS = ["#3b5bdb", "#e8590c", "#2b8a3e", "#ae3ec9", "#c92a2a", "#1098ad"];

  const el = (name, attrs, text) => {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const fmt = (v) => Math.abs(v) >= 1000 || (Math.abs(v) < 0.01 && v !== 0)
    ? v.toExponential(1) : Number(v.toPrecision(3)).toString();

  function chart(name, points, color) {
    const figure = document.createElement("figure");
    figure.className = "metric";
    figure.dataset.metric = name;
    const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
    let [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    if (x0 === x1) x1 = x0 + 1;
    if (y0 === y1) { y0 -= 1; y1 += 1; }
    const sx = (x) => PAD.l + ((x - x0) / (x1 - x0)) * (W - PAD.l - PAD.r);
    const sy = (y) => H - PAD.b - ((y - y0) / (y1 - y0)) * (H - PAD.t - PAD.b);
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img",
      "aria-label": `${name} against step, ${points.length} points, last ${fmt(ys[ys.length - 1])}` });
    svg.append(el("line", { x1: PAD.l, y1: H - PAD.b, x2: W - PAD.r, y2: H - PAD.b, class: "axis" }));
    svg.append(el("line", { x1: PAD.l, y1: PAD.t, x2: PAD.l, y2: H - PAD.b, class: "axis" }));
    for (const y of [y0, (y0 + y1) / 2, y1]) {
      svg.append(el("text", { x: PAD.l - 6, y: sy(y) + 4, "text-anchor": "end", class: "tick" }, fmt(y)));
    }
    for (const x of [x0, x1]) {
      svg.append(el("text", { x: sx(x), y: H - 10, "text-anchor": "middle", class: "tick" }, fmt(x)));
    }
    const path = points.map((p, i) => `${i ? "L" : "M"}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join("");
    svg.append(el("path", { d: path, fill: "none", stroke: color, "stroke-width": 2 }));
    if (points.length === 1) svg.append(el("circle", { cx: sx(xs[0]), cy: sy(ys[0]), r: 3, fill: color }));
    const caption = document.createElement("figcaption");
    caption.textContent = `${name} (last: ${fmt(ys[ys.length - 1])})`;
    figure.append(caption, svg);
    return figure;
  }

  async function refresh() {
    let data;
    try {
      const response = await fetch(url, { credentials: "same-origin" });
      if (!response.ok) return setTimeout(refresh, 5000);
      data = await response.json();
    } catch (error) {
      return setTimeout(refresh, 5000);
    }
    const charts = data.names.map((name, i) => {
      const points = data.rows.filter((r) => typeof r[name] === "number").map((r) => [r.step, r[name]]);
      return points.length ? chart(name, points, COLORS[i % COLORS.length]) : null;
    }).filter(Boolean);
    const area = box.querySelector("[data-role=charts]");
    if (charts.length) {
      area.replaceChildren(...charts);
      box.hidden = false;
    }
    if (!data.is_final) setTimeout(refresh, 3000);
  }
  refresh();
})();
