// Draws the usage report's charts with Chart.js from the same numbers as the tables below them.
(function () {
  "use strict";
  const source = document.getElementById("report-data");
  if (!source || !window.Chart) return;
  const data = JSON.parse(source.textContent);
  const COLORS = ["#3b5bdb", "#e8590c", "#2b8a3e", "#ae3ec9", "#c92a2a", "#1098ad", "#f08c00",
                  "#5c940d", "#868e96"];
  const color = (i) => COLORS[i % COLORS.length];
  const base = { responsive: true, maintainAspectRatio: false, animation: false,
                 plugins: { legend: { position: "bottom" } } };
  const stacked = { x: { stacked: true }, y: { stacked: true, beginAtZero: true } };
  const charts = {
    over_time: (d) => ({
      type: "bar",
      data: { labels: d.labels, datasets: d.series.map((s, i) => ({
        label: s.name, data: s.values, backgroundColor: color(i) })) },
      options: { ...base, scales: { ...stacked, y: { ...stacked.y,
        title: { display: true, text: "GPU-hours" } } } },
    }),
    outcomes: (d) => ({
      type: "bar",
      data: { labels: d.labels, datasets: d.series.map((s, i) => ({
        label: s.name, data: s.values,
        backgroundColor: ["#2b8a3e", "#c92a2a", "#868e96", "#f08c00", "#ae3ec9"][i] })) },
      options: { ...base, indexAxis: "y", scales: { x: { stacked: true, beginAtZero: true },
        y: { stacked: true } } },
    }),
    waits: (d) => ({
      type: "bar",
      data: { labels: d.labels, datasets: [{ label: "Jobs", data: d.values,
        backgroundColor: "#3b5bdb" }] },
      options: { ...base, plugins: { legend: { display: false } },
        scales: { y: { beginAtZero: true, title: { display: true, text: "Jobs" } } } },
    }),
    losses: (d) => ({
      type: "bar",
      data: { labels: d.labels, datasets: [
        { label: "Committed GPU-hours", data: d.committed, backgroundColor: "#2b8a3e" },
        { label: "Lost to evictions", data: d.lost, backgroundColor: "#c92a2a" }] },
      options: { ...base, scales: stacked },
    }),
  };
  const utilization = (d) => ({
    type: "line",
    data: { labels: d.labels, datasets: [
      { label: "Utilization %", data: d.utilization, borderColor: "#3b5bdb",
        backgroundColor: "#3b5bdb", spanGaps: true },
      { label: "Harvest %", data: d.harvest, borderColor: "#2b8a3e",
        backgroundColor: "#2b8a3e", spanGaps: true }] },
    options: { ...base, scales: { y: { min: 0, max: 100, title: { display: true, text: "%" } } } },
  });
  charts.utilization_hour = utilization;
  charts.utilization_weekday = utilization;
  document.querySelectorAll("canvas[data-chart]").forEach((canvas) => {
    const name = canvas.dataset.chart;
    if (!charts[name] || !data[name]) return;
    const chart = new Chart(canvas, charts[name](data[name]));
    canvas.dataset.rendered = String(chart.data.datasets.length);
  });
})();
