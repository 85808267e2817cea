// Plots what a job uses (CPU, memory, disk, GPU, GPU memory) against time, one line per run and a
// dashed line at what it asked for, as dependency-free SVG, refreshing while the job runs.
(function () {
  "use strict";
  const box = document.querySelector("[data-role=usage]");
  if (!box) return;
  const url = box.dataset.usageUrl;
  const SVG = "http://www.w3.org/2000/svg";
  const W = 460, H = 200, PAD = { l: 52, r: 12, t: 12, b: 30 };
  const RUN_COLORS = ["#3b5bdb", "#e8590c", "#2b8a3e", "#ae3ec9", "#c92a2a", "#1098ad"];
  const SERIES = [
    { key: "cpus", title: "CPU cores busy", unit: "cores", request: (r) => r.cpus },
    { key: "memory_mb", title: "Memory", unit: "MB", request: (r) => r.memory_mb },
    { key: "disk_mb", title: "Disk", unit: "MB", request: (r) => r.disk_mb },
    { key: "gpu_utilization", title: "GPU busy", unit: "%", scale: 100, max: 100, gpu: true },
    { key: "gpu_memory_mb", title: "GPU memory (peak)", unit: "MB", gpu: true },
  ];

  const el = (name, attrs, text) => {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const fmt = (v) => (Math.abs(v) >= 100 ? Math.round(v) : Number(v.toPrecision(3))).toString();
  const clock = (ms) => new Date(ms).toTimeString().slice(0, 5);

  function chart(series, runs, request) {
    const lines = runs.map((run) => run.samples
      .filter((s) => typeof s[series.key] === "number")
      .map((s) => [Date.parse(s.time), s[series.key] * (series.scale || 1)]))
      .filter((points) => points.length);
    if (!lines.length) return null;
    const all = lines.flat();
    const xs = all.map((p) => p[0]);
    let ys = all.map((p) => p[1]);
    if (typeof request === "number") ys = ys.concat([request]);
    let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
    if (x0 === x1) { x0 -= 30000; x1 += 30000; }
    const y0 = 0, y1 = series.max || Math.max(...ys) * 1.1 || 1;
    const sx = (x) => PAD.l + ((x - x0) / (x1 - x0)) * (W - PAD.l - PAD.r);
    const sy = (y) => H - PAD.b - ((y - y0) / (y1 - y0)) * (H - PAD.t - PAD.b);
    const last = lines[lines.length - 1];
    const lastValue = last[last.length - 1][1];
    const figure = document.createElement("figure");
    figure.className = "metric";
    figure.dataset.usage = series.key;
    const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, role: "img",
      "aria-label": `${series.title} over time, ${lines.length} run${lines.length > 1 ? "s" : ""}, last ${fmt(lastValue)} ${series.unit}` });
    svg.append(el("line", { x1: PAD.l, y1: H - PAD.b, x2: W - PAD.r, y2: H - PAD.b, class: "axis" }));
    svg.append(el("line", { x1: PAD.l, y1: PAD.t, x2: PAD.l, y2: H - PAD.b, class: "axis" }));
    for (const y of [y0, (y0 + y1) / 2, y1]) {
      svg.append(el("text", { x: PAD.l - 6, y: sy(y) + 4, "text-anchor": "end", class: "tick" }, fmt(y)));
    }
    for (const x of [x0, x1]) {
      svg.append(el("text", { x: sx(x), y: H - 10, "text-anchor": "middle", class: "tick" }, clock(x)));
    }
    if (typeof request === "number") {
      svg.append(el("line", { x1: PAD.l, x2: W - PAD.r, y1: sy(request), y2: sy(request),
        stroke: "#868e96", "stroke-dasharray": "4 3", "data-role": "requested" }));
    }
    lines.forEach((points, i) => {
      const color = RUN_COLORS[i % RUN_COLORS.length];
      const path = points.map((p, j) => `${j ? "L" : "M"}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join("");
      svg.append(el("path", { d: path, fill: "none", stroke: color, "stroke-width": 2 }));
      if (points.length === 1) svg.append(el("circle", { cx: sx(points[0][0]), cy: sy(points[0][1]), r: 3, fill: color }));
    });
    const caption = document.createElement("figcaption");
    const asked = typeof request === "number" ? `; asked for ${fmt(request)}` : "";
    caption.textContent = `${series.title} (last: ${fmt(lastValue)} ${series.unit}${asked})`;
    figure.append(caption, svg);
    return figure;
  }

  async function refresh() {
    let data;
    try {
      const response = await fetch(url, { credentials: "same-origin" });
      if (!response.ok) return setTimeout(refresh, 10000);
      data = await response.json();
    } catch (error) {
      return setTimeout(refresh, 10000);
    }
    const charts = SERIES
      .filter((series) => !series.gpu || data.requested.gpus)
      .map((series) => chart(series, data.runs, series.request ? series.request(data.requested) : null))
      .filter(Boolean);
    if (charts.length) {
      box.querySelector("[data-role=usage-charts]").replaceChildren(...charts);
      box.querySelector("[data-role=usage-empty]").hidden = true;
    }
    if (data.summary && !box.querySelector("[data-role=usage-advice]") && data.advice.length) {
      box.append(adviceBlock(data));  // the job ended while its page was open
    }
    if (!data.is_final || !data.summary) setTimeout(refresh, 10000);
  }

  function adviceBlock(data) {
    const block = document.createElement("div");
    block.className = "advice";
    block.dataset.role = "usage-advice";
    const heading = document.createElement("h3");
    heading.textContent = "Advice for the next run";
    const list = document.createElement("ul");
    for (const item of data.advice) {
      const li = document.createElement("li");
      li.dataset.kind = item.kind;
      li.textContent = item.text;
      list.append(li);
    }
    block.append(heading, list);
    if (data.clone_url) {
      const link = document.createElement("a");
      link.className = "button";
      link.dataset.role = "usage-clone";
      link.href = data.clone_url;
      link.textContent = "Clone with these settings…";
      const p = document.createElement("p");
      p.append(link);
      block.append(p);
    }
    return block;
  }
  refresh();
})();
