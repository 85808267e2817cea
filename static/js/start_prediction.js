// Refreshes a waiting job's predicted start (and its expected interruptions) on its page,
// every 30 seconds while it waits.
(function () {
  "use strict";
  const line = document.querySelector("[data-role=start-prediction]");
  if (!line) return;
  const url = line.dataset.startUrl;
  const interruptions = document.querySelector("[data-role=start-interruptions]");
  const deadline = document.querySelector("[data-role=start-deadline]");

  async function refresh() {
    let payload;
    try {
      const answer = await fetch(url, { headers: { Accept: "application/json" } });
      if (!answer.ok) return;
      payload = await answer.json();
    } catch (error) {
      return;
    }
    if (!payload.waiting) {
      line.hidden = true;
      if (interruptions) interruptions.hidden = true;
      if (deadline) deadline.hidden = true;
      return;
    }
    if (payload.prediction) {
      line.textContent = payload.prediction.text;
      line.hidden = false;
      for (const [element, text] of [[interruptions, payload.prediction.interruptions],
        [deadline, payload.prediction.deadline]]) {
        if (!element) continue;
        element.textContent = text;
        element.hidden = !text;
      }
    }
    window.setTimeout(refresh, 30000);
  }
  window.setTimeout(refresh, 30000);
})();
