// Follows a job live: state, timeline, logs (appended by byte offset) and outputs.
(function () {
  "use strict";
  const root = document.getElementById("job");
  if (!root) return;
  const url = root.dataset.statusUrl;
  const offsets = { stdout: -1, stderr: -1, install: -1 };  // -1: start with a long log's tail
  const $ = (role) => root.querySelector(`[data-role="${role}"]`);

  function setProblem(role, text) {
    const el = $(role);
    el.hidden = !text;
    el.querySelector("span").textContent = text || "";
  }

  function renderLogs(logs) {
    if (logs.install.size > 0) $("install-section").hidden = false;
    for (const stream of Object.keys(offsets)) {
      const chunk = logs[stream];
      const view = $(stream);
      if (offsets[stream] < 0 || chunk.start < offsets[stream]) {
        view.textContent = "";  // first read, or a new run rewrote the log
        view.dataset.truncated = chunk.start > 0 ? "true" : "false";
      }
      if (chunk.text) view.textContent += chunk.text;
      // Keep the page light: past 1 MB, show only the newest part (the raw link has it all).
      if (view.textContent.length > 1048576) {
        view.textContent = view.textContent.slice(-524288);
        view.dataset.truncated = "true";
      }
      $(`${stream}-note`).hidden = view.dataset.truncated !== "true";
      offsets[stream] = chunk.offset;
    }
  }

  function render(data) {
    const state = $("state");
    state.textContent = data.state_label;
    state.className = `state state-${data.state}`;
    $("detail").textContent = data.status_detail;
    const idle = data.state === "idle";
    setProblem("schedd-problem", data.schedd_problem);
    setProblem("match-problem", idle ? data.match_problem : "");
    setProblem("wait-reason", idle && !data.match_problem ? data.wait_reason : "");
    $("hold").hidden = !data.hold_title;
    $("hold-title").textContent = data.hold_title;
    $("hold-advice").textContent = data.hold_advice;
    $("hold-reason").textContent = data.hold_reason;
    $("hold-clone").hidden = !data.hold_clone_url;
    if (data.hold_clone_url) $("hold-clone").href = data.hold_clone_url;
    $("condor-id").textContent = data.condor_id || "not yet submitted";
    $("workstation").textContent = data.workstation || "—";
    $("num-starts").textContent = data.num_starts;
    $("exit").textContent = data.exit_signal !== null ? `signal ${data.exit_signal}`
      : data.exit_code !== null ? `code ${data.exit_code}` : "—";
    renderLogs(data.logs);
    const events = $("events");
    events.replaceChildren(...data.events.map((e) => {
      const li = document.createElement("li");
      const time = document.createElement("time");
      time.dateTime = e.at;
      time.textContent = new Date(e.at).toLocaleTimeString();
      const kind = document.createElement("strong");
      kind.textContent = e.kind;
      li.append(time, " ", kind, " ", e.detail);
      return li;
    }));
    const outputs = $("outputs");
    if (data.outputs.length) {
      outputs.replaceChildren(...data.outputs.map((f) => {
        const li = document.createElement("li");
        const a = document.createElement("a");
        a.href = f.url;
        a.textContent = f.path;
        li.append(a, ` (${f.size} bytes)`);
        return li;
      }));
    }
    // The owner's "Publish as a model", once the job has ended with its outputs ready.
    const publish = $("publish-model");
    if (publish) publish.hidden = !(data.is_final && data.outputs_ready && data.outputs.length);
    const actions = $("actions");
    if (actions.dataset.state !== data.state) {
      actions.innerHTML = data.actions_html;  // rendered by the server for the new state
      actions.dataset.state = data.state;
    }
  }

  // Every 2 s while the job changes. A page whose answers stay the same (the portal says 304
  // to the ETag it last sent) asks less and less often, up to every 10 s; a page in a
  // background tab every 30 s, and at once when shown again. The page keeps the ETag itself
  // rather than leaving it to the browser's cache: an answer's ETag names the document for
  // the offsets it leaves the page at, the very next poll's, which the cache (keyed by the
  // URL, offsets and all) would never send it with.
  const FAST_MS = 2000;
  const SLOW_MS = 10000;
  const HIDDEN_MS = 30000;
  let delay = FAST_MS;
  let lastEtag = null;
  let timer = null;

  function schedule() {
    timer = setTimeout(poll, document.hidden ? HIDDEN_MS : delay);
  }

  async function poll() {
    timer = null;
    try {
      const query = Object.entries(offsets).map(([s, o]) => `${s}_offset=${o}`).join("&");
      const response = await fetch(`${url}?${query}`, {
        credentials: "same-origin",
        cache: "no-store",
        // The portal may answer with only the logs' new text when nothing else changed.
        headers: lastEtag ? { "If-None-Match": lastEtag, "X-Nightshift-Partial": "logs" } : {},
      });
      if (response.status === 304) {
        delay = Math.min(delay * 1.5, SLOW_MS);
      } else if (response.ok) {
        lastEtag = response.headers.get("ETag");
        delay = FAST_MS;
        const data = await response.json();
        if (data.logs_only) {
          renderLogs(data.logs);
        } else {
          render(data);
          if (data.is_final && data.outputs_ready) return;
        }
      }
    } catch (error) {
      console.warn("status poll failed", error);
    }
    schedule();
  }

  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && timer !== null) {
      clearTimeout(timer);
      delay = FAST_MS;
      poll();
    }
  });
  poll();
})();
