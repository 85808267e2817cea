// Beside the GPU fields: how many workstations and GPUs match the request right now.
(function () {
  "use strict";
  const form = document.querySelector("form[data-match-url]");
  const panel = form && form.querySelector("[data-role=match]");
  if (!panel) return;
  const addVariable = form.querySelector("[data-role=env-add]");
  if (addVariable) {
    addVariable.addEventListener("click", () => {
      const rows = form.querySelectorAll(".env-row");
      const row = rows[rows.length - 1].cloneNode(true);
      for (const input of row.querySelectorAll("input")) input.value = "";
      addVariable.before(row);
      row.querySelector("input").focus();
    });
  }
  const fields = ["gpus", "gpu_memory_gb", "gpu_capability", "cpus", "memory_gb",
    "max_runtime_minutes", "finish_by"];
  let timer = null;
  let latest = 0;  // answers to older requests are ignored

  function say(text, kind) {
    panel.className = `match ${kind || ""}`;
    panel.textContent = text;
  }

  async function check() {
    const asked = ++latest;
    const query = new URLSearchParams();
    for (const name of fields) if (form.elements[name]) query.set(name, form.elements[name].value);
    try {
      const response = await fetch(`${form.dataset.matchUrl}?${query}`, { credentials: "same-origin" });
      const data = await response.json();
      if (asked !== latest) return;
      if (data.pool_down) return say("The pool is not answering right now; your job will wait for it.");
      if (!data.ok) return say("Fix the highlighted values to see which workstations match.");
      if (!data.machines_matching) return say(`No workstation can run this. ${data.reason}`, "none");
      const gpus = data.gpus_matching ? ` (${data.gpus_matching} GPUs)` : "";
      const free = data.machines_free_now
        ? `${data.machines_free_now} free now${data.gpus_free_now ? `, ${data.gpus_free_now} GPUs` : ""}.`
        : data.busy_reason;
      const more = [data.start_text, data.deadline_text, data.interruptions_text, data.reservation_text]
        .filter(Boolean).map((text) => ` ${text}`).join("");
      say(`${data.machines_matching} of ${data.machines_total} workstations${gpus} match. ${free}${more}`, "ok");
    } catch (error) {
      say("Could not ask the pool.");
    }
  }

  const preview = form.querySelector("details.preview");
  const previewText = preview && preview.querySelector("[data-role=preview]");
  async function showPreview() {
    if (!preview || !preview.open) return;
    const query = new URLSearchParams(new FormData(form));
    query.delete("script");
    query.delete("csrfmiddlewaretoken");
    const file = form.elements.script.files[0];
    query.set("script_name", file ? file.name : "train.py");
    const response = await fetch(`${preview.dataset.previewUrl}?${query}`, { credentials: "same-origin" });
    previewText.textContent = await response.text();
  }
  if (preview) preview.addEventListener("toggle", showPreview);

  let resourcesChanged = false;  // survives the debounce, whichever field was typed in last
  form.addEventListener("input", (event) => {
    resourcesChanged = resourcesChanged || fields.includes(event.target.name);
    clearTimeout(timer);
    timer = setTimeout(() => {
      if (resourcesChanged) check();
      resourcesChanged = false;
      showPreview();
    }, 300);
  });
  check();
})();
