// A notebook session's page: time left, the warning before the end, and why it ended.
(function () {
  "use strict";
  const session = document.querySelector('[data-role="session"]');
  if (!session) return;
  const left = session.querySelector('[data-role="time-left"]');
  const warning = session.querySelector('[data-role="session-warning"]');
  const ended = session.querySelector('[data-role="session-ended"]');
  const state = session.querySelector('[data-role="session-state"]');
  let seconds = left.dataset.seconds === "" ? null : Number(left.dataset.seconds);
  const wasRunning = session.dataset.running === "true";

  const spell = (s) => {
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    return h ? `${h} h ${m} min` : `${m} min ${s % 60} s`;
  };
  const show = () => {
    if (seconds === null) { left.textContent = ""; return; }
    left.textContent = `${spell(seconds)} left`;
    warning.querySelector('[data-role="warning-left"]').textContent = spell(seconds);
  };
  const apply = (status) => {
    state.textContent = status.state_label;
    seconds = status.seconds_left;
    warning.hidden = !status.warn;
    if (status.ended) {
      ended.textContent = status.ended;
      ended.hidden = false;
      warning.hidden = true;
      for (const gone of session.querySelectorAll('[data-role="notebook"], [data-role="end-session"], [data-role="own-tab"]')) {
        gone.remove();
      }
    }
    show();
    // It just started: the page gets its notebook.
    if (status.running && !wasRunning) window.location.reload();
    return !status.ended;
  };
  const poll = async () => {
    let again = true;
    try {
      const response = await fetch(session.dataset.statusUrl, { credentials: "same-origin" });
      if (response.ok) again = apply(await response.json());
    } catch (error) {
      console.warn("session status", error);
    }
    if (again) setTimeout(poll, 5000);
  };
  show();
  setInterval(() => { if (seconds !== null && seconds > 0) { seconds -= 1; show(); } }, 1000);
  setTimeout(poll, 2000);
})();
