// The owner's page: the countdown until the workstation is theirs, and what it gave per week.
(function () {
  "use strict";
  document.querySelectorAll("[data-countdown]").forEach((element) => {
    const end = Date.now() + 1000 * Number(element.dataset.countdown);
    const tick = () => {
      const left = Math.max(0, Math.round((end - Date.now()) / 1000));
      element.textContent = left >= 60 ? `${Math.floor(left / 60)} min ${left % 60} s` : `${left} s`;
      if (left > 0) window.setTimeout(tick, 1000);
      else window.setTimeout(() => window.location.reload(), 2000);
    };
    tick();
  });
  const draw = (sourceId, chartName) => {
    const source = document.getElementById(sourceId);
    const canvas = document.querySelector(`canvas[data-chart=${chartName}]`);
    if (!source || !canvas || !window.Chart) return;
    drawGiven(canvas, JSON.parse(source.textContent));
  };
  draw("given-data", "given");
  draw("given-terms-data", "given-terms");
})();

// GPU-hours as bars and kWh as a line on its own axis, per week or per term.
function drawGiven(canvas, data) {
  "use strict";
  new window.Chart(canvas, {
    type: "bar",
    data: { labels: data.labels, datasets: [
      { label: "GPU-hours", data: data.gpu_hours, backgroundColor: "#3b5bdb", yAxisID: "y" },
      { label: "kWh above idle", data: data.kwh, type: "line", borderColor: "#f08c00",
        backgroundColor: "#f08c00", spanGaps: true, yAxisID: "kwh" }] },
    options: { responsive: true, maintainAspectRatio: false, animation: false,
               plugins: { legend: { position: "bottom" } },
               scales: { y: { beginAtZero: true, title: { display: true, text: "GPU-hours" } },
                         kwh: { beginAtZero: true, position: "right", grid: { drawOnChartArea: false },
                                title: { display: true, text: "kWh" } } } },
  });
}

