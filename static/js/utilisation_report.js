// Draws the utilisation report's charts with Chart.js from the same numbers as its tables.
(function () {
  "use strict";
  const source = document.getElementById("utilisation-data");
  if (!source || !window.Chart) return;
  const data = JSON.parse(source.textContent);
  const base = { responsive: true, maintainAspectRatio: false, animation: false,
                 plugins: { legend: { position: "bottom" } } };
  const charts = {
    bands: (d) => ({
      type: "bar",
      data: { labels: d.labels, datasets: [{ label: "GPU-hours", data: d.gpu_hours,
        backgroundColor: ["#c92a2a", "#f08c00", "#3b5bdb", "#2b8a3e", "#868e96"] }] },
      options: { ...base, plugins: { legend: { display: false } },
        scales: { y: { beginAtZero: true, title: { display: true, text: "GPU-hours" } } } },
    }),
    idle: (d) => ({
      type: "bar",
      data: { labels: d.labels, datasets: [
        { label: "Busy GPU-hours", data: d.busy, backgroundColor: "#2b8a3e" },
        { label: "Idle GPU-hours", data: d.idle, backgroundColor: "#c92a2a" }] },
      options: { ...base, scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true } } },
    }),
    energy: (d) => ({
      type: "bar",
      data: { labels: d.labels, datasets: [{ label: "kWh above idle", data: d.kwh,
        backgroundColor: "#f08c00" }] },
      options: { ...base, plugins: { legend: { display: false } },
        scales: { y: { beginAtZero: true, title: { display: true, text: "kWh" } } } },
    }),
  };
  for (const canvas of document.querySelectorAll("canvas[data-chart]")) {
    const make = charts[canvas.dataset.chart];
    if (!make || !data[canvas.dataset.chart]) continue;
    const chart = new window.Chart(canvas, make(data[canvas.dataset.chart]));
    canvas.dataset.rendered = String(chart.data.datasets.length);
  }
})();
