// The sweep page's charts: the chosen metric over steps for the runs ticked in the table,
// overlaid, and each run's parameter value against its best value of the metric.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("sweep-chart-data").textContent);
  const section = document.querySelector('[data-role="sweep-charts"]');
  if (!data.metric || !section || typeof Chart === "undefined") return;
  const boxes = Array.from(document.querySelectorAll('[data-role="compare"]'));
  const byIndex = new Map(data.runs.map((run) => [run.index, run]));
  const cache = new Map();
  const label = (run) => "#" + run.index + " " + Object.entries(run.parameters)
    .map(([name, value]) => name + "=" + value).join(" ");

  const curves = new Chart(section.querySelector('[data-role="curves"]'), {
    type: "line",
    data: { datasets: [] },
    options: {
      animation: false, parsing: false, normalized: true,
      scales: { x: { type: "linear", title: { display: true, text: "step" } },
                y: { title: { display: true, text: data.metric } } },
      plugins: { legend: { position: "bottom" } },
    },
  });

  async function metricsOf(run) {
    if (!cache.has(run.index)) {
      const response = await fetch(run.metrics_url, { headers: { Accept: "application/json" } });
      const body = response.ok ? await response.json() : { rows: [] };
      cache.set(run.index, (body.rows || [])
        .filter((row) => typeof row[data.metric] === "number")
        .map((row) => ({ x: row.step, y: row[data.metric] })));
    }
    return cache.get(run.index);
  }

  async function drawCurves() {
    const chosen = boxes.filter((box) => box.checked).map((box) => byIndex.get(Number(box.value)));
    const datasets = [];
    for (const run of chosen) {
      datasets.push({ label: label(run), data: await metricsOf(run), pointRadius: 0, borderWidth: 1.5 });
    }
    curves.data.datasets = datasets;
    curves.update();
  }

  for (const box of boxes) {
    box.checked = data.compare.includes(Number(box.value));
    box.addEventListener("change", drawCurves);
  }
  drawCurves();

  const select = section.querySelector('[data-role="scatter-parameter"]');
  const scatterCanvas = section.querySelector('[data-role="scatter"]');
  if (!data.numeric_parameters.length) {
    select.hidden = scatterCanvas.hidden = true;
    return;
  }
  const scatter = new Chart(scatterCanvas, {
    type: "scatter",
    data: { datasets: [{ label: "best " + data.metric, data: [] }] },
    options: {
      animation: false,
      scales: { x: { title: { display: true, text: select.value } },
                y: { title: { display: true, text: "best " + data.metric } } },
    },
  });
  function drawScatter() {
    const name = select.value;
    scatter.data.datasets[0].data = data.runs
      .filter((run) => run.best !== null)
      .map((run) => ({ x: run.parameters[name], y: run.best }));
    scatter.options.scales.x.title.text = name;
    const values = scatter.data.datasets[0].data.map((point) => point.x).filter((x) => x > 0);
    const spread = values.length ? Math.max(...values) / Math.min(...values) : 1;
    scatter.options.scales.x.type = spread >= 100 ? "logarithmic" : "linear";
    scatter.update();
  }
  select.addEventListener("change", drawScatter);
  drawScatter();
})();
